"""handlers/silence.py: ``silence kimi 2h [reason]`` and ``unsilence kimi`` — who may, for how long, and what is said.

Who may silence is who may restart; a refusal is audited. A silence lives in the store (SQLite here), so the
answers are checked with what the store and the audit log then hold.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.app import runtime
from bot.dispatch import answer
from config.loader import parse_config
from config.models import BotConfig
from handlers.context import Asker
from handlers.silence import MAX_SILENCE_S, silence_sections, silence_words
from services import mentions
from services.store.records import Silence

CFG = parse_config("""
[[nodes]]
name = "gpu-a"
host = "h1"
[[services]]
name = "kimi"
node = "gpu-a"
unit = "vllm-kimi.service"
[[services]]
name = "qwen"
node = "gpu-a"
unit = "vllm-qwen.service"
[access]
restart_users = ["U0ALICE"]
""")
T0 = datetime(2026, 12, 2, 13, 40, tzinfo=UTC)


def with_state(tmp_path: Path) -> BotConfig:
    state = tmp_path / "state"
    state.mkdir()
    return BotConfig.model_validate({**CFG.model_dump(exclude={"source"}), "state": {"dir": str(state)}})


async def test_silence_from_the_terminal_is_audited_as_the_os_user(tmp_path: object) -> None:
    state = Path(str(tmp_path)) / "state"
    state.mkdir()
    cfg = BotConfig.model_validate({**CFG.model_dump(exclude={"source"}), "state": {"dir": str(state)}})
    async with runtime(cfg) as rt:
        ctx = rt.context(Asker(surface="cli", user_id="terminal:alice"))
        r = await answer("silence qwen 45m swapping a GPU", ctx)
        assert r.ok and r.title.startswith("qwen on gpu-a silenced until ") and "(45m" in r.title, r.title
        assert r.data["silences"][0]["by"] == "terminal:alice"
        r = await answer("silence qwen 8d", ctx)
        assert not r.ok and "at most" in str(r.error)
        r = await answer("unsilence qwen", ctx)
        assert r.ok and "silence ended" in r.title
        r = await answer("unsilence qwen", ctx)
        assert r.ok and "was not silenced" in r.title
        events = [(e.event, e.who) for e in await rt.store.audit.recent("qwen")]  # type: ignore[union-attr]
        assert ("silence.set", "terminal:alice") in events and ("silence.cleared", "terminal:alice") in events


async def test_who_may_not_restart_may_not_silence_and_the_refusal_is_audited(tmp_path: Path) -> None:
    async with runtime(with_state(tmp_path)) as rt:
        eve = rt.context(Asker(surface="slack", user_id="U0EVE", channel_id="C1"))
        r = await answer("silence kimi 2h", eve)
        assert not r.ok and r.data["refused"] is True
        assert str(r.error).startswith("not allowed: ") and "(who may silence a service is who may restart it)" in str(
            r.error)
        assert await rt.store.silences.active(datetime.now(UTC)) == []
        assert [e.event for e in await rt.store.audit.recent("kimi")] == ["silence.refused"]
        alice = rt.context(Asker(surface="slack", user_id="U0ALICE", channel_id="C1"))
        r = await answer("silence kimi", alice)  # no duration
        assert not r.ok and str(r.error).startswith("say for how long, e.g. `silence kimi 2h planned driver update`")
        r = await answer(f"silence kimi {int(MAX_SILENCE_S // 86400) + 1}d", alice)
        assert not r.ok and str(r.error).startswith("a silence lasts at most 7d 0h")
        assert await rt.store.silences.active(datetime.now(UTC)) == []
        r = await answer("silence kimi 2h planned driver update", alice)
        assert r.ok and r.title.endswith("(2h 00m) — planned driver update")
        [held] = await rt.store.silences.active(datetime.now(UTC))
        assert (held.service, held.node, held.by, held.reason) == ("kimi", "gpu-a", "U0ALICE", "planned driver update")
        assert held.until - held.at == timedelta(hours=2)
        # A silence that already ended by itself is not "ended" again.
        past = datetime.now(UTC) - timedelta(minutes=5)
        await rt.store.silences.put(Silence(service="qwen", node="gpu-a", until=past, by="U0ALICE",
                                            at=past - timedelta(hours=1)))
        r = await answer("unsilence qwen", alice)
        assert r.ok and r.title == "qwen on gpu-a was not silenced: nothing to end" and r.data["ended"] == []


def test_a_silence_in_force_is_one_line_of_status() -> None:
    s = Silence(service="kimi", node="gpu-a", until=T0, reason="planned driver update", by="U0ALICE",
                at=T0 - timedelta(hours=2))
    assert silence_words(s) == f"silenced until 13:40 UTC by {mentions.user('U0ALICE')}: planned driver update"
    [line] = silence_sections([s, s.model_copy(update={"service": "qwen", "reason": ""})], [("kimi", "gpu-a")])
    assert (line.kind, line.title) == ("context", "Silenced")
    assert line.text == f"🔕 kimi on gpu-a {silence_words(s)}"
    assert silence_sections([s], [("qwen", "gpu-a")]) == []
