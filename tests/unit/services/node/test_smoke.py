"""services/node/smoke.py: the smoke completion's fixed template (the key never on a command line, every value
quoted) and the reading of what it printed, worded for a person and redacted."""

from __future__ import annotations

import pytest

from services.node.smoke import MARK, build_smoke_script, parse_smoke_output
from services.redact import Redactor
from services.sim.scenarios import KIMI_API_KEY


def _out(rc: int, body: str, tail: str) -> str:
    import base64

    return f"{MARK} rc={rc}\n" + base64.b64encode(f"{body}\n{tail}".encode()).decode() + "\n"


def test_script_has_no_key_and_quotes_its_values() -> None:
    script = build_smoke_script("http://127.0.0.1:8000", "moonshotai/Kimi-K2.5", 30)
    assert "B='{\"model\": \"moonshotai/Kimi-K2.5\", \"prompt\": \"Hello\", \"max_tokens\": 1, \"temperature\": 0}'" \
        in script
    assert "IFS= read -r K" in script and "-H @-" in script
    with pytest.raises(ValueError):
        build_smoke_script("http://127.0.0.1:8000", "x'; rm -rf / #", 30)
    with pytest.raises(ValueError):
        build_smoke_script("http://h:1/$(id)", "m", 30)


@pytest.mark.parametrize(("stdout", "keyed", "outcome", "detail"), [
    (_out(0, '{"choices": [{"text": " hi"}]}', "200 0.412"), True, "ok", ""),
    (_out(0, '{"error": {"message": "boom", "type": "InternalServerError", "code": 500}}', "500 0.1"), True,
     "failed", "the smoke completion failed: HTTP 500 — InternalServerError: boom"),
    (_out(0, '{"object": "error", "message": "bad", "type": "BadRequestError", "code": 400}', "400 0.1"), True,
     "failed", "the smoke completion failed: HTTP 400 — BadRequestError: bad"),
    (_out(0, '{"error": "Unauthorized"}', "401 0.01"), False, "skipped",
     "the server requires an API key and I hold none (set api_key_env)"),
    (_out(0, '{"error": "Unauthorized"}', "401 0.01"), True, "failed",
     "the smoke completion failed: HTTP 401 — the server refused the API key I hold"),
    (_out(28, "", "000 30.0"), True, "failed", "the smoke completion timed out after 30 s"),
    (_out(7, "", "000 0.0"), True, "failed", "the smoke completion could not reach the server (connection refused)"),
    ("", True, "failed", "the smoke completion did not run on the node (no answer)"),
])
def test_parse(stdout: str, keyed: bool, outcome: str, detail: str) -> None:
    r = parse_smoke_output(stdout, keyed, 30, Redactor())
    assert (r.outcome, r.detail) == (outcome, detail)
    if outcome == "ok":
        assert r.ttft_s == pytest.approx(0.412)


def test_error_text_is_redacted() -> None:
    body = '{"error": {"message": "bad header Bearer ' + KIMI_API_KEY + '", "type": "BadRequestError"}}'
    r = parse_smoke_output(_out(0, body, "400 0.1"), True, 30, Redactor([KIMI_API_KEY]))
    assert KIMI_API_KEY not in r.detail and "[redacted]" in r.detail
