"""services/redaction/keyed.py: ``name=value`` in free text — the value of a secret-named key goes, whatever its
quoting or separator; a key that only names a flag, a count, or a non-secret name keeps its text."""

from __future__ import annotations

import pytest

from services.redaction.keyed import BEARER, redact_after_marks, redact_keyed, redact_tuples


def keyed(s: str) -> str:
    return redact_keyed(s, s.lower())


@pytest.mark.parametrize(("text", "shown"), [
    ("HF_TOKEN=hf_abc123 PORT=8000", "HF_TOKEN=[redacted] PORT=8000"),
    ("--api-key sk-1 sk-2 --port 8000", "--api-key [redacted] --port 8000"),  # every value of the flag
    ("password: hunter2, user: bob", "password: [redacted], user: bob"),
    ("Authorization: Bearer abc.def", "Authorization: [redacted]"),  # the scheme and its token
    ("Cookie: a=1; b=2", "Cookie: [redacted]"),  # a cookie header is one value to its end
    ('{"apiKey": "x y", "n": 1}', '{"apiKey": "[redacted]", "n": 1}'),
    ("https://h/x?access_token=at-5&page=2", "https://h/x?access_token=[redacted]&page=2"),
])
def test_the_value_of_a_secret_named_key_goes(text: str, shown: str) -> None:
    assert keyed(text) == shown


@pytest.mark.parametrize("text", [
    "argument --api-key: expected one argument",  # vLLM's usage error names the flag, it sets nothing
    "Generated tokens: 128",  # a count
    "tokenizer=/m/tok",  # "token" inside a name that is not a secret
    "the api key was rotated",  # prose
])
def test_what_only_names_a_key_is_kept(text: str) -> None:
    assert keyed(text) == text


def test_header_tuples_bearer_tokens_and_values_after_a_marker() -> None:
    assert redact_tuples("headers=[('Authorization', 'Bearer xyz'), ('Accept', 'json')]") == \
        "headers=[('Authorization', '[redacted]'), ('Accept', 'json')]"
    assert BEARER.sub(lambda m: m["k"] + "[redacted]", "got Bearer eyJabc.def back") == "got Bearer [redacted] back"
    assert redact_after_marks("token=[redacted] next") == "token=[redacted] next"
