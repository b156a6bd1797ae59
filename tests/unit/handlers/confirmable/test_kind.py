"""handlers/confirmable/kind.py: the rewritten confirmation says what happened, in its kind's words.

The header of a Slack message is plain text, so the mention of who confirmed stays in the sentence and
leaves the header; the context line names the request, its unit and who asked.
"""

from __future__ import annotations

from datetime import UTC, datetime

from handlers.bench_run import BENCH
from handlers.confirmable.kind import message
from handlers.restart import RESTART
from services import mentions
from services.store.records import ConfirmableRequest

AT = datetime(2026, 12, 2, 14, 2, tzinfo=UTC)


def request(kind: str, rid: str) -> ConfirmableRequest:
    return ConfirmableRequest(id=rid, kind=kind, service="kimi", node="gpu-a", unit="vllm-kimi.service",
                              requested_by="U0ALICE", created_at=AT, expires_at=AT, state="running")


def test_the_message_keeps_the_mention_in_its_sentence_and_out_of_its_header() -> None:
    text = f"Restart confirmed by {mentions.user('U0BOB')} at 14:02 — restarting…"
    reply = message(RESTART, request("restart", "r-1"), text, "loading")
    assert reply.intent == "restart" and reply.title == "Restart confirmed at 14:02 — restarting…"
    assert mentions.plain(reply.data["notice"]) == "Restart confirmed by <@U0BOB> at 14:02 — restarting…"
    assert mentions.plain(str(reply.sections[1].text)) == (
        "Restart of kimi on gpu-a (vllm-kimi.service), asked by <@U0ALICE> — request r-1")
    assert reply.actions == [] and reply.data["state"] == "loading"


def test_each_kind_speaks_its_own_words_in_the_same_sentences() -> None:
    reply = message(BENCH, request("bench", "b-1"), f"Cancelled by {mentions.user('U0BOB')}", "info")
    assert reply.intent == "bench" and reply.title == "Cancelled"
    assert mentions.plain(str(reply.sections[1].text)).startswith("Benchmark of kimi on gpu-a (vllm-kimi.service)")
    assert RESTART.words.elsewhere.format(service="kimi", command="restart") == (
        "refused: from the terminal, use `inferbot restart kimi` (it asks you to type the name back)")
    assert BENCH.words.elsewhere.format(service="kimi", command=BENCH.words.command) == (
        "refused: `bench` is asked in Slack, where it is confirmed with a button")
