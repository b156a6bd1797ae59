"""config/duration.py: a duration as a person writes it in the config, in seconds; else one line saying how."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from config.duration import Duration, parse_duration


@pytest.mark.parametrize(("written", "seconds"), [
    ("0s", 0.0), ("90s", 90.0), ("10m", 600.0), ("1h", 3600.0), ("2d", 172800.0), ("250ms", 0.25),
    (" 1.5 h ", 5400.0), ("45", 45.0), (30, 30.0), (2.5, 2.5), (0, 0.0),
])
def test_what_people_write_is_read_in_seconds(written: object, seconds: float) -> None:
    assert parse_duration(written) == seconds


@pytest.mark.parametrize("written", ["ten minutes", "10 min", "-5s", "1h30m", "", "5w", True, None, [60]])
def test_anything_else_is_refused_saying_how_to_write_one(written: object) -> None:
    with pytest.raises(ValueError, match=r"is not a duration|a duration is a number"):
        parse_duration(written)


def test_a_negative_number_is_refused_in_words() -> None:
    with pytest.raises(ValueError, match="cannot be negative"):
        parse_duration(-1)


def test_a_config_field_typed_duration_holds_seconds() -> None:
    class Watch(BaseModel):
        poll: Duration

    assert Watch.model_validate({"poll": "15s"}).poll == 15.0
    with pytest.raises(ValidationError, match=r"'soon' is not a duration; write e\.g\. '0s', '90s'"):
        Watch.model_validate({"poll": "soon"})
