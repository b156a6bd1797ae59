"""services/node/curl_answer.py: what a curl template printed, read back — shapes printed by the real curl
and base64 (the smoke and chat templates' own tests run them end to end)."""

from __future__ import annotations

import base64

from services.node.curl_answer import CurlAnswer, error_text, read_curl_answer, unreachable_text

MARK = "@@mark@@"


def printed(rc: int, body: str, tail: str, before: str = "") -> str:
    return before + f"{MARK} rc={rc}\n" + base64.b64encode(f"{body}\n{tail}".encode()).decode() + "\n"


def test_an_answer_is_read_after_its_mark_only() -> None:
    out = printed(0, '{"ok": 1}\nsecond line', "200 0.250", before=f"noise\n{MARK}x not this\n")
    assert read_curl_answer(out, MARK) == CurlAnswer(0, '{"ok": 1}\nsecond line', 200, 0.25)


def test_no_mark_is_no_answer_and_a_failed_curl_has_no_status() -> None:
    assert read_curl_answer("sh: curl: not found\n", MARK) is None
    assert read_curl_answer(printed(7, "", "000 0.000"), MARK) == CurlAnswer(7, "", 0, 0.0)
    assert read_curl_answer(f"{MARK} rc=\n", MARK) == CurlAnswer(-1, "", None, None)


def test_words_for_curl_exits_and_vllm_errors() -> None:
    assert unreachable_text(7) == "connection refused" and unreachable_text(35) == "curl exit 35"
    assert error_text('{"error": {"message": "boom", "type": "BadRequestError"}}') == "BadRequestError: boom"
    assert error_text('{"object": "error", "message": "bad"}') == "bad"
    assert error_text('{"error": "Unauthorized"}') == "Unauthorized" and error_text(" plain ") == "plain"
