"""``inferbot serve``: tokens from the environment only, one clear line when missing, no secrets in logs."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import aiohttp
import pytest
from conftest import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, closed_port, event_body, mention, sign
from fake_slack import FakeSlack

from bot.logs import JsonFormatter
from bot.slack.client import MissingToken, api_base_url, load_tokens, read_secret
from bot.slack.serve import EXIT_USAGE, serve
from config.models import BotConfig, SlackSettings


def config(tmp_path: Path) -> BotConfig:
    return BotConfig.model_validate({"state": {"dir": str(tmp_path / "state")}})


@pytest.mark.parametrize(("http", "env", "expected"), [
    (False, {}, "SLACK_BOT_TOKEN is not set: install the app"),
    (False, {"SLACK_BOT_TOKEN": BOT_TOKEN},
     "SLACK_APP_TOKEN is not set: create an app-level token with connections:write under Basic Information → "
     "App-Level Tokens"),
    (True, {"SLACK_BOT_TOKEN": BOT_TOKEN}, "SLACK_SIGNING_SECRET is not set: copy the Signing Secret"),
    (False, {"SLACK_BOT_TOKEN": APP_TOKEN, "SLACK_APP_TOKEN": APP_TOKEN}, "SLACK_BOT_TOKEN does not look like"),
])
async def test_missing_tokens_exit_2_with_one_line(tmp_path, monkeypatch, capsys, http, env, expected):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert await serve(config(tmp_path), http=http, host="127.0.0.1", port=closed_port()) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("inferbot: ") and expected in err
    assert BOT_TOKEN not in err and APP_TOKEN not in err


def test_cli_serve_without_tokens_exits_2(tmp_path, capsys):
    from bot.cli import main

    cfg = tmp_path / "inferbot.toml"
    # Issue 10: an empty config is now refused on its own ("the config is empty"): give it one node.
    cfg.write_text(f'[[nodes]]\nname = "gpu-a"\nhost = "127.0.0.1"\n[state]\ndir = "{tmp_path}"\n')
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        assert main(["serve", "--config", str(cfg)]) == EXIT_USAGE
    finally:
        root.handlers[:], _ = saved[0], root.setLevel(saved[1])
    err = capsys.readouterr().err
    assert "SLACK_BOT_TOKEN is not set" in err and err.count("\n") == 1


def test_tokens_from_files(tmp_path):
    (tmp_path / "bot").write_text(BOT_TOKEN + "\n")
    (tmp_path / "app").write_text(APP_TOKEN)
    env = {"SLACK_BOT_TOKEN_FILE": str(tmp_path / "bot"), "SLACK_APP_TOKEN_FILE": str(tmp_path / "app")}
    tokens = load_tokens(http=False, env=env)
    assert tokens.bot.reveal() == BOT_TOKEN and tokens.app is not None and tokens.app.reveal() == APP_TOKEN
    assert BOT_TOKEN not in repr(tokens) and BOT_TOKEN not in str(tokens)
    (tmp_path / "empty").write_text("")
    with pytest.raises(MissingToken, match="is empty"):
        read_secret("SLACK_BOT_TOKEN", {"SLACK_BOT_TOKEN_FILE": str(tmp_path / "empty")})
    with pytest.raises(MissingToken, match="cannot read"):
        read_secret("SLACK_BOT_TOKEN", {"SLACK_BOT_TOKEN_FILE": str(tmp_path / "nope")})


def test_api_url_from_config_and_environment():
    assert api_base_url(SlackSettings(), env={}) == "https://slack.com/api/"
    assert api_base_url(SlackSettings(api_url="https://slack-gov.com/api"), env={}) == "https://slack-gov.com/api/"
    assert api_base_url(SlackSettings(), env={"INFERBOT_SLACK_API_URL": "http://127.0.0.1:9/api/"}) == \
        "http://127.0.0.1:9/api/"


async def test_token_refused_by_slack_exits_2(tmp_path, monkeypatch, capsys, fake_slack: FakeSlack):
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
    monkeypatch.setenv("INFERBOT_SLACK_API_URL", fake_slack.api_url)
    fake_slack.fail_once("auth.test", status=200, retry_after=None, body={"ok": False, "error": "invalid_auth"})
    assert await serve(config(tmp_path), http=False, host="127.0.0.1", port=0) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "SLACK_BOT_TOKEN was refused by Slack (invalid_auth)" in err and err.count("\n") == 1


@pytest.fixture
def json_logs():
    """Everything logged (DEBUG and up, every logger) through the app's JSON formatter."""
    lines: list[str] = []
    raw: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            # The raw record too, not only the redacted JSON: nothing may hand a secret to logging at all.
            raw.append(f"{record.name}: {record.getMessage()} {vars(record)}")
            lines.append(self.format(record))

    handler = Collect(logging.DEBUG)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield lines, raw
    root.removeHandler(handler)
    root.setLevel(old)


async def test_serve_socket_mode_end_to_end_without_secrets_in_logs(tmp_path, monkeypatch, fake_slack: FakeSlack,
                                                                    json_logs):
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_APP_TOKEN", APP_TOKEN)
    monkeypatch.setenv("INFERBOT_SLACK_API_URL", fake_slack.api_url)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(config(tmp_path), http=False, host="127.0.0.1", port=0, stop=stop))
    await fake_slack.wait_connected()
    fake_slack.fail_once("chat.postMessage", status=200, retry_after=None,
                         body={"ok": False, "error": "not_in_channel"})
    env = await fake_slack.send_envelope("events_api", event_body(mention("help me with secret-question")))
    await fake_slack.wait_ack(env)
    await fake_slack.wait_for("chat.postMessage", 1)
    env = await fake_slack.send_envelope("events_api", event_body(mention("help")))
    await fake_slack.wait_for("chat.postMessage", 2)
    stop.set()
    assert await asyncio.wait_for(task, 5) == 0
    assert (tmp_path / "state" / "heartbeat").exists()
    assert (tmp_path / "state" / "heartbeat").read_text().split()[1:] == ["leader"]  # SQLite: the sole leader
    json_logs, raw = json_logs
    text = "\n".join(json_logs)
    assert not [r for r in raw if "SecretBotTokenValue" in r or "SecretAppTokenValue" in r]
    assert '"msg": "slack answer"' in text and '"outcome": "post-failed"' in text and "not_in_channel" in text
    assert BOT_TOKEN not in text and APP_TOKEN not in text
    assert "SecretBotTokenValue" not in text and "SecretAppTokenValue" not in text
    info = [json.loads(line) for line in json_logs if json.loads(line)["level"] != "debug"]
    assert "secret-question" not in json.dumps(info)  # no message texts at INFO


async def test_serve_http_mode_end_to_end(tmp_path, monkeypatch, fake_slack: FakeSlack, json_logs):
    monkeypatch.setenv("SLACK_BOT_TOKEN", BOT_TOKEN)
    monkeypatch.setenv("SLACK_SIGNING_SECRET", SIGNING_SECRET)
    monkeypatch.setenv("INFERBOT_SLACK_API_URL", fake_slack.api_url)
    port = closed_port()
    stop = asyncio.Event()
    task = asyncio.create_task(serve(config(tmp_path), http=True, host="127.0.0.1", port=port, stop=stop))
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as s:
        for _ in range(100):
            try:
                async with s.get(base + "/healthz") as r:
                    assert r.status == 200 and await r.text() == "ok leader"  # issue 12: the role (SQLite: leader)
                    break
            except aiohttp.ClientConnectionError:
                await asyncio.sleep(0.02)
        raw = json.dumps(event_body(mention("help")))
        async with s.post(base + "/slack/events", data=raw,
                          headers={"Content-Type": "application/json", **sign(raw)}) as r:
            assert r.status == 200
        await fake_slack.wait_for("chat.postMessage")
        async with s.post(base + "/slack/events", data=raw,
                          headers={"Content-Type": "application/json", **sign(raw, secret="bad")}) as r:
            assert r.status == 401
    stop.set()
    assert await asyncio.wait_for(task, 5) == 0
    json_logs, raw = json_logs
    text = "\n".join(json_logs)
    assert BOT_TOKEN not in text and SIGNING_SECRET not in text
    assert not [r for r in raw if "SecretBotTokenValue" in r or SIGNING_SECRET in r]
