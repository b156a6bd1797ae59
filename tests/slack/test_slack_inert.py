"""Text from a node, a unit, the store or a person is inert in Slack; only the bot's own mentions are live
(issue 22, item 1). Through the real Bolt app, the fake Slack and the simulated node behind real sshd.

Slack's rule for what is live (its message-formatting spec): every ``<…>`` sequence in a mrkdwn text or a
message's ``text`` is a link, a mention or a special command (``<!channel>``); ``&lt;…&gt;`` is text. And
without ``verbatim`` on a mrkdwn object (or ``parse=none`` on a message's text) Slack links raw URLs and
``#channel`` names by itself. So every call the fake received is read that way, whatever method it was.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from conftest import all_text, sign
from fake_slack import Call, FakeSlack
from test_health_slack import health_bot  # noqa: F401  (the fixture: real sshd, sim node, real app)
from test_restart_slack import ALICE, BOB, EVE, NOTIFY, OPS, SRE, OutageSlack, confirmation, until
from test_slack_home import home_opened, published

from services.sim.scenarios import KIMI_UNIT
from tests.test_restart import set_profile

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

HOSTILE_NAME = "<!subteam^S123> <@U999> https://evil.example/claim"
SHOWN = "&lt;!subteam^S123&gt; &lt;@U999&gt; https://evil.example/claim"  # as text: escaped, the URL unlinked
HOSTILE_LINE = "GET /v1/models <!channel> <https://evil.example|open the runbook> 200 OK"
# The mentions the bot itself makes in these conversations (askers, confirmers, the config's group).
OURS = {f"<@{ALICE}>", f"<@{BOB}>", f"<@{EVE}>", f"<!subteam^{SRE}>", f"<#{OPS}>", f"<#{NOTIFY}>"}
_LIVE = re.compile(r"<[^<>]*>")


def _mrkdwn_objects(o: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if isinstance(o, dict):
        if o.get("type") == "mrkdwn" and isinstance(o.get("text"), str):
            out.append(o)
        for v in o.values():
            out += _mrkdwn_objects(v)
    elif isinstance(o, list):
        for v in o:
            out += _mrkdwn_objects(v)
    return out


def _decoded(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str) and value[:1] in "[{" else value


def slack_surfaces(call: Call) -> list[tuple[str, str, bool]]:
    """(where, text, auto-linking off) for every string Slack parses in one call."""
    out: list[tuple[str, str, bool]] = []
    body = call.body
    if isinstance(body.get("text"), str):
        # A message's own text is parsed like mrkdwn; parse=none stops Slack linking raw URLs in it.
        # (A response_url or the ack of a slash command takes the same message payload.)
        out.append((f"{call.method}.text", body["text"], body.get("parse") == "none"))
    for key in ("blocks", "view"):
        for obj in _mrkdwn_objects(_decoded(body.get(key))):
            out.append((f"{call.method}.{key}", obj["text"], obj.get("verbatim") is True))
    return out


def assert_inert(fs: FakeSlack) -> None:
    """Nothing the bot sent to Slack holds live markup but its own mentions, or a raw URL Slack would link."""
    problems: list[str] = []
    for call in fs.calls:
        for where, text, no_autolink in slack_surfaces(call):
            for live in _LIVE.findall(text):
                if live not in OURS:
                    problems.append(f"{where}: live {live!r}")
            if "://" in text and not no_autolink:
                problems.append(f"{where}: a raw URL Slack would link: {text[:120]!r}")
    assert not problems, problems


async def post_event(b: Any, body: dict[str, Any]) -> None:
    raw = json.dumps(body)
    async with b.session.post(b.url + "/slack/events", data=raw,
                              headers={"Content-Type": "application/json", **sign(raw)}) as r:
        assert r.status == 200


def sent(fs: FakeSlack, method: str, word: str) -> list[Call]:
    return [c for c in fs.calls_to(method) if word in json.dumps(c.body, ensure_ascii=False)]


async def hostile_unit(health_bot: Any) -> Any:  # noqa: F811
    """The bot on a node whose unit on disk names the model `<!subteam^S123> <@U999>` and has it in its
    Description (edited, not restarted), and whose next start of vLLM fails at once: its last journal lines
    carry that text (systemd's "Stopped …", vLLM's "non-default args")."""
    fs = OutageSlack()
    b = await health_bot(fs)
    sim = b.node
    unit_file = next((sim.root / "etc/systemd/system").glob("vllm-kimi*.service"))
    text = unit_file.read_text()
    assert "--served-model-name kimi-k2.5" in text and "Description=vLLM Kimi-K2.5" in text
    text = text.replace("--served-model-name kimi-k2.5", f'--served-model-name "{HOSTILE_NAME}"')
    # ...and describes it so too: systemd writes the Description in its own journal lines ("Stopped …").
    text = text.replace("Description=vLLM Kimi-K2.5", f"Description={HOSTILE_NAME} Kimi-K2.5")
    sim.edit_unit(KIMI_UNIT, text)
    set_profile(sim, fail_at="startup")
    return b


async def test_unit_text_is_inert_in_the_restart_confirmation_and_the_failure_notice(health_bot: Any) -> None:  # noqa: F811
    b = await hostile_unit(health_bot)
    fs = b.fs
    # The restart confirmation: "this restart applies: --served-model-name kimi-k2.5 → …".
    await b.mention("restart kimi")
    rid, ts = await confirmation(b)
    [confirm] = sent(fs, "chat.postMessage", "restart_confirm")
    assert SHOWN in all_text(_decoded(confirm.body["blocks"]))
    assert f"<@{ALICE}>" in all_text(_decoded(confirm.body["blocks"]))  # the asker: a real mention
    assert f"<@{ALICE}>" in confirm.body["text"]  # ...in the notification too
    # Someone not allowed clicks: told privately (an ephemeral message naming them).
    await b.click("restart_confirm", rid, EVE, ts)
    [refusal] = await fs.wait_for("chat.postEphemeral", 1, within=10)
    assert f"<@{EVE}>" in refusal.body["text"] and refusal.body.get("parse") == "none"
    # Confirmed: the restart fails, and the ❌ notices carry the last journal lines.
    await b.click("restart_confirm", rid, BOB, ts)
    await until(lambda: len(sent(fs, "chat.postMessage", "Last journal lines")) >= 2, 60, "the ❌ notices")
    failed = sent(fs, "chat.postMessage", "Last journal lines")
    assert {c.body.get("channel") for c in failed} == {OPS, NOTIFY}
    for channel in (OPS, NOTIFY):  # a long notice may come in parts: what each channel got, together
        got = [c for c in failed if c.body.get("channel") == channel]
        assert SHOWN in "\n".join(all_text(_decoded(c.body["blocks"])) for c in got)
        assert SHOWN in "\n".join(c.body["text"] for c in got)
    rewrite = sent(fs, "chat.update", "Restart confirmed by")
    assert rewrite and f"<@{BOB}>" in all_text(_decoded(rewrite[0].body["blocks"]))  # the confirmer: live
    # Every call the bot made: blocks, message texts (notifications), ephemerals, edits.
    assert_inert(fs)


async def test_unit_text_is_inert_on_the_home_tab(health_bot: Any) -> None:  # noqa: F811
    b = await hostile_unit(health_bot)
    # The pending change is a warning on the card.
    await post_event(b, home_opened(ALICE))
    await until(lambda: bool(published(b.fs, ALICE)), 20, "the Home tab")
    home = json.dumps(published(b.fs, ALICE)[-1], ensure_ascii=False)
    assert SHOWN in home
    assert_inert(b.fs)


async def test_a_log_line_that_pings_the_channel_and_links_is_inert(health_bot: Any) -> None:  # noqa: F811
    fs = OutageSlack()
    b = await health_bot(fs)
    # `logs kimi`: a request-log line carrying `<!channel>` and a labelled link.
    b.node.log_line(KIMI_UNIT, HOSTILE_LINE)
    await b.mention("logs kimi", ts="1700000060.000100")
    await until(lambda: bool(sent(fs, "chat.postMessage", "evil.example")), 30, "the logs answer")
    [logs] = sent(fs, "chat.postMessage", "evil.example")
    escaped = "&lt;!channel&gt; &lt;https://evil.example|open the runbook&gt;"
    assert escaped in all_text(_decoded(logs.body["blocks"]))
    assert escaped in logs.body["text"]
    # The same answer when Slack refuses its blocks: posted again as its text alone, just as inert.
    fs.fail_once("chat.postMessage", status=200, retry_after=None, body={"ok": False, "error": "invalid_blocks"})
    await b.mention("logs kimi", ts="1700000070.000100")
    await until(lambda: any(not c.body.get("blocks") for c in sent(fs, "chat.postMessage", "evil.example")), 30,
                "the plain-text fallback")
    [fallback] = [c for c in sent(fs, "chat.postMessage", "evil.example") if not c.body.get("blocks")]
    assert escaped in fallback.body["text"]
    assert_inert(fs)
