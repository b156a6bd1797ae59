"""Every block fits Slack's limits whatever its source, and a render that fails still answers (issue 22, item 2).

Through the real Bolt app and the fake Slack, whose chat.postMessage refuses blocks over Block Kit's
documented limits as Slack does.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from conftest import all_text, event_body, mention
from fake_slack import FakeSlack
from test_health_slack import health_bot  # noqa: F401  (the fixture: real sshd, sim node, real app)
from test_restart_slack import OPS, OutageSlack, until

import bot.slack.app as slack_app
from bot.slack.app import state_of
from bot.slack.poster import Poster
from handlers.reply import Action, Reply, Section
from services.sim.scenarios import KIMI_UNIT

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


def escaped(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


async def test_status_answers_with_a_12kb_chat_template_pending_on_disk(health_bot: Any) -> None:  # noqa: F811
    fs = OutageSlack()
    b = await health_bot(fs)
    sim = b.node
    # An inline chat template of ~13 KB added to the unit on disk, not yet applied: status warns about it.
    template = "".join(f"{{{{ '<|im_start|>' + messages[{i}]['role'] + ' ' + messages[{i}]['content'] + "
                       f"'<|im_end|>' }}}}" for i in range(150))
    assert len(template) > 12_000
    unit_file = next((sim.root / "etc/systemd/system").glob("vllm-kimi*.service"))
    text = unit_file.read_text().replace("--served-model-name kimi-k2.5",
                                         f'--served-model-name kimi-k2.5 --chat-template "{template}"')
    sim.edit_unit(KIMI_UNIT, text)
    await b.mention("status", ts="1700000080.000100")
    await until(lambda: bool(fs.calls_to("chat.postMessage")), 30, "the status answer")
    await b.fs.quiet(1.0)
    calls = [c for c in fs.calls_to("chat.postMessage") if c.body.get("thread_ts") == "1700000080.000100"]
    assert calls and fs.invalid_messages == []  # answered, and every block within Slack's limits
    assert all(c.body.get("channel") == OPS and c.body.get("blocks") for c in calls)
    # Nothing of the warning was cut: the template is there whole, across as many blocks as it takes.
    pieces = []
    for c in calls:
        blocks = c.body["blocks"]
        for blk in json.loads(blocks) if isinstance(blocks, str) else blocks:
            if blk["type"] == "context" and "continued (part" not in all_text([blk]):
                pieces.append(all_text([blk]).replace("\n", ""))
    assert escaped(template) in "".join(pieces)


def unrenderable(_: str) -> Reply:
    # slack_sdk refuses an action_id over 255 characters: a render that fails, whatever made it fail.
    return Reply(intent="status", title="Status", sections=[Section(kind="text", text="all fine")],
                 actions=[Action(action_id="x" * 300, text="Do it", value="v")])


async def test_an_answer_that_cannot_be_rendered_still_gets_a_short_answer(fake_slack: FakeSlack, make_app,
                                                                          empty_runtime, serve_http, monkeypatch,
                                                                          caplog) -> None:
    async def answer(text: str, ctx: Any, *_: Any) -> Reply:
        return unrenderable(text)

    monkeypatch.setattr(slack_app, "answer", answer)
    caplog.set_level(logging.INFO)
    app = make_app(empty_runtime)
    http = await serve_http(app)
    await http.post_event(event_body(mention("status", ts="1700000090.000100")))
    [call] = await fake_slack.wait_for("chat.postMessage")
    await state_of(app).drain(3)
    assert call.body["thread_ts"] == "1700000090.000100"
    said = all_text(call.body["blocks"])
    assert "could not lay out the answer to “status”" in said and "SlackObjectFormationError" in said
    assert "SlackObjectFormationError" in call.body["text"]
    [failed] = [r for r in caplog.records if r.getMessage() == "rendering the answer for Slack failed"]
    assert failed.exc_info is not None  # the cause, with its traceback, in the log


async def test_a_notice_that_cannot_be_rendered_is_posted_as_its_one_line(fake_slack: FakeSlack,
                                                                           web_client: Any) -> None:
    reply = unrenderable("")
    reply = reply.model_copy(update={"data": {"notice": "✅ kimi on gpu-a is ready — loaded in 29m 14s"}})
    ts = await Poster(web_client).post("C0NOTIFY1", None, reply)
    [call] = fake_slack.calls_to("chat.postMessage")
    assert ts and "✅ kimi on gpu-a is ready — loaded in 29m 14s" in call.body["text"]
    assert "could not be laid out" in call.body["text"]
