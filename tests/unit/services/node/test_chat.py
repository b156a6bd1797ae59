"""services/node/chat.py: the structured chat completion's fixed template (nothing but the URL and the
timeout on the command line; the body and the key on stdin as curl's config) and the reading of what it
printed. The config is checked by the real curl against a local server that says what it received."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from aiohttp import web

from services.node.chat import MARK, ChatMessage, ChatRequest, build_chat_script, curl_config, parse_chat_output
from services.redact import Redactor
from services.sim.scenarios import KIMI_API_KEY

NASTY = 'kimi "quoted" \\back\\slash $(id) `id` ; rm -rf / #\nsecond line\t🙂 ünïcode\r\n'


def request(text: str = NASTY) -> ChatRequest:
    return ChatRequest(model="kimi-k2.5", schema_name="inferbot_intent",
                       json_schema={"type": "object", "properties": {"intent": {"type": "string"}}},
                       messages=[ChatMessage(role="system", content="classify"),
                                 ChatMessage(role="user", content=text)])


def _out(rc: int, body: str, tail: str) -> str:
    return f"{MARK} rc={rc}\n" + base64.b64encode(f"{body}\n{tail}".encode()).decode() + "\n"


def test_the_script_holds_only_the_url_and_the_timeout() -> None:
    script = build_chat_script("http://127.0.0.1:8000/", 1)
    assert "U=http://127.0.0.1:8000;" in script and "T=1\n" in script and "curl -s -K -" in script
    assert "kimi-k2.5" not in script and "Bearer" not in script
    with pytest.raises(ValueError):
        build_chat_script("http://h:1/$(id)", 1)


def test_the_request_asks_for_the_schema_at_temperature_zero() -> None:
    body = json.loads(request().body())
    assert body["temperature"] == 0 and body["messages"][1]["content"] == NASTY
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["name"] == "inferbot_intent"
    assert "\n" not in request().body()  # one line of curl's config
    with pytest.raises(ValueError):
        ChatRequest(model="x'; id #", schema_name="s", json_schema={}, messages=[])


async def test_real_curl_sends_the_body_and_the_key_exactly(unused_tcp_port: int) -> None:
    seen: dict[str, str] = {}

    async def chat(r: web.Request) -> web.Response:
        seen["body"], seen["auth"], seen["path"] = await r.text(), r.headers.get("Authorization", ""), r.path
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": '{"intent": "gpus"}'}}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", unused_tcp_port).start()
    try:
        script = build_chat_script(f"http://127.0.0.1:{unused_tcp_port}", 5)
        proc = await asyncio.create_subprocess_exec("sh", "-c", script, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate(curl_config(request(), KIMI_API_KEY).encode())
    finally:
        await runner.cleanup()
    assert seen["path"] == "/v1/chat/completions" and seen["auth"] == f"Bearer {KIMI_API_KEY}"
    assert json.loads(seen["body"]) == json.loads(request().body())
    result = parse_chat_output(out.decode(), 5, Redactor())
    assert (result.outcome, result.content) == ("ok", '{"intent": "gpus"}')


def test_curl_config_refuses_a_key_with_a_line_break() -> None:
    with pytest.raises(ValueError):
        curl_config(request(), "key\nurl = http://elsewhere")


@pytest.mark.parametrize(("stdout", "outcome", "detail"), [
    (_out(28, "", "000 1.0"), "timeout", "the model did not answer within 1 s"),
    (_out(7, "", "000 0.0"), "failed", "the chat completion could not reach the server (connection refused)"),
    (_out(0, '{"error": {"message": "boom", "type": "InternalServerError"}}', "500 0.1"), "failed",
     "the chat completion failed: HTTP 500 — InternalServerError: boom"),
    (_out(0, '{"object": "list"}', "200 0.1"), "failed", "the chat completion answered 200 without a message"),
    (_out(0, json.dumps({"choices": [{"message": {"content": "x" * 5000}}]}), "200 0.1"), "failed",
     "the chat completion's message is not a short text"),
    ("", "failed", "the chat completion did not run on the node (no answer)"),
])
def test_parse(stdout: str, outcome: str, detail: str) -> None:
    r = parse_chat_output(stdout, 1, Redactor())
    assert (r.outcome, r.detail, r.content) == (outcome, detail, None)


def test_an_error_is_redacted() -> None:
    body = json.dumps({"error": {"message": f"bad header Bearer {KIMI_API_KEY}"}})
    r = parse_chat_output(_out(0, body, "401 0.1"), 1, Redactor([KIMI_API_KEY]))
    assert KIMI_API_KEY not in r.detail and "[redacted]" in r.detail


def test_the_template_passes_shellcheck() -> None:
    from tests.test_probe_shellcheck import findings

    found = findings(build_chat_script("http://127.0.0.1:8000", 1.5))
    assert not found, found
