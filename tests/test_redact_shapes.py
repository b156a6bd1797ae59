"""The importable secrets corpus (tests/samples/secrets/corpus.py): each shape is redacted by the function that sees it.

The same data drives the real-systemd tier end to end; here it checks the redaction functions directly.
"""

from __future__ import annotations

import json

import pytest

from services.redact import (
    REDACTED,
    Redactor,
    collect_secret_values,
    is_secret_name,
    redact_json_or_text,
    redact_patterns,
    redact_value,
)
from tests.samples.secrets.corpus import CORPUS, NOT_SECRET_LINES, SecretShape


def test_corpus_is_big_enough() -> None:
    assert len(CORPUS) >= 40
    assert len({s.id for s in CORPUS}) == len(CORPUS)


def _outputs(shape: SecretShape) -> list[str]:
    outs = [redact_patterns(shape.text), Redactor().text(shape.text)]
    if shape.name is not None and shape.value is not None:
        outs.append(f"{shape.name}={redact_value(shape.name, shape.value)}")
    if shape.where == "json_flag" and shape.value is not None:
        outs.append(redact_json_or_text(shape.value))
    return outs


@pytest.mark.parametrize("shape", CORPUS, ids=[s.id for s in CORPUS])
def test_secret_never_in_output(shape: SecretShape) -> None:
    for out in _outputs(shape):
        for secret in shape.secrets:
            assert secret not in out, (shape.id, out)
        assert REDACTED in out, (shape.id, out)


@pytest.mark.parametrize("shape", [s for s in CORPUS if s.keep], ids=[s.id for s in CORPUS if s.keep])
def test_non_secret_parts_kept(shape: SecretShape) -> None:
    out = redact_json_or_text(shape.value) if shape.value is not None else redact_patterns(shape.text)
    for part in shape.keep:
        assert part in out, (shape.id, out)


_JSON = [s for s in CORPUS if s.where == "json_flag"]


@pytest.mark.parametrize("shape", _JSON, ids=[s.id for s in _JSON])
def test_redacted_json_stays_valid(shape: SecretShape) -> None:
    assert shape.value is not None
    out = redact_json_or_text(shape.value)
    json.loads(out)
    assert f'"{REDACTED}"' in out and f"'{REDACTED}'" not in out


# Values the assembler hands to the Redactor: secret-named env/flag values and whole JSON flag values.
_KNOWN = [s for s in CORPUS if s.value is not None and s.name is not None
          and (is_secret_name(s.name) or s.where == "json_flag")]


@pytest.mark.parametrize("shape", _KNOWN, ids=[s.id for s in _KNOWN])
def test_known_values_redacted_elsewhere(shape: SecretShape) -> None:
    """A value seen on the unit (env, flag, nested JSON key) is redacted in any other text it appears in."""
    assert shape.value is not None
    r = Redactor()
    if shape.where == "json_flag":
        # Nested secret values (numbers too) are mined from the parsed flag value.
        r.add(*collect_secret_values(json.loads(shape.value)))
        for secret in shape.secrets:
            assert secret not in r.text(f"the server said: {secret} !"), shape.id
    else:
        whole = shape.value.strip("'\"")  # what the unit/env-file parser hands over
        r.add(whole)
        assert whole not in r.text(f"the server said: {whole} !"), shape.id


@pytest.mark.parametrize("line", NOT_SECRET_LINES)
def test_ordinary_lines_unchanged(line: str) -> None:
    assert redact_patterns(line) == line
    assert Redactor(["true", "1", "8000"]).text(line) == line
