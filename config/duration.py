"""Durations as people write them in the config: "0s", "90s", "10m", "1h", or a number of seconds."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BeforeValidator

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(value: object) -> float:
    """Return seconds for a duration like ``"90s"``, ``"10m"``, ``"1h"`` or a plain number."""
    if isinstance(value, bool):
        raise ValueError("a duration is a number of seconds or text like '90s', '10m', '1h'")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return float(value)
    if isinstance(value, str):
        m = _DURATION.match(value)
        if m:
            return float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
    raise ValueError(f"{value!r} is not a duration; write e.g. '0s', '90s', '10m', '1h' or a number of seconds")


Duration = Annotated[float, BeforeValidator(parse_duration)]
