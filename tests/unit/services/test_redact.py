"""services/redact.py, the public API of redaction: each shape of the importable secrets corpus
(tests/samples/secrets/corpus.py) is redacted by the function that sees it, and the :class:`Redactor` replaces
every known value wherever it appears.

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


# -- known values ------------------------------------------------------------------------------------------


def test_known_values_replaced_in_place() -> None:
    r = Redactor(["s3cr3t-value"])
    assert r.text("line with s3cr3t-value inside") == f"line with {REDACTED} inside"


def test_known_values_redacted_wherever_they_appear() -> None:
    r = Redactor()
    r.add_from({"kv": {"api_key": {"v": "plain-looking-value"}}, "token": 12345678901})
    line = "connecting with plain-looking-value to id 12345678901 on port 8000"
    assert r.text(line) == f"connecting with {REDACTED} to id {REDACTED} on port 8000"
    assert r.known_count == 2


def test_known_values_inside_json_keep_it_valid() -> None:
    r = Redactor(["12345678901", "known-str-9"])
    text = '{"id":12345678901,"note":"uses known-str-9 here","n":7}'
    out = r.text(text)
    assert json.loads(out) == {"id": REDACTED, "note": f"uses {REDACTED} here", "n": 7}
    clean = '{"cudagraph_mode":"FULL_AND_PIECEWISE","max_cudagraph_capture_size":256}'
    assert r.text(clean) == clean
    assert r.text(redact_value("kv-transfer-config", '{"extra":{"api_key":{"v":"x"}},"id":12345678901}')) == \
        '{"extra":{"api_key":"[redacted]"},"id":"[redacted]"}'


def test_a_known_value_that_is_a_key_name_takes_the_value_after_it() -> None:
    """A secret-named setting whose value is a key's name ("credential_source": "aws_secret_access_key") made the
    key itself "[redacted]", and the value after it was shown."""
    r = Redactor()
    r.add_from({"credential_source": "aws_secret_access_key"})
    line = "INFO 12-02 10:00:01 [s3.py:41] aws_secret_access_key = ywJDgcb6qcF0xrKJzUfTjIAJV77i"
    for out in (r.text(line), r.lines([line])[0]):
        assert "ywJDgcb6qcF0xrKJzUfTjIAJV77i" not in out and "[s3.py:41]" in out, out


def test_a_short_known_value_never_cuts_into_a_file_name_or_a_word() -> None:
    r = Redactor(["vllm", "tok1"])
    out = r.text("[vllm_config.py:12] loading pytok1 as vllm with tok1")
    assert out == f"[vllm_config.py:12] loading pytok1 as {REDACTED} with {REDACTED}"
