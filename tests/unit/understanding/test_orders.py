"""bot/understanding/orders.py: an order is an order only when it is one (issue 23, point 3)."""

from __future__ import annotations

import pytest

from bot.understanding import orders
from bot.understanding.markup import read
from bot.understanding.text import words

KIMI = {"kimi", "qwen"}


def decide(text: str, surface: str = "slack") -> str:
    w = words(read(text, surface))  # type: ignore[arg-type]
    verb = next(t for t in w.tokens if t.stem in ("restart", "bounc", "kick", "reboot"))
    names = {t.index for t in w.tokens if t.norm in KIMI}
    return orders.decide(w, verb, names)


@pytest.mark.parametrize(("text", "decision"), [
    ("restart kimi", "order"), ("please restart kimi", "order"), ("can you restart kimi?", "order"),
    ("could you restart qwen? it's serving garbage", "order"), ("kimi is wedged, restart it", "order"),
    ("force restart kimi, the lock is from the crashed bot", "order"), ("restart kimi now pls", "order"),
    ("kimi is not responding at all, restart it", "order"),  # the negation is about kimi, not the restart
    ("restart kimi?", "ask"), ("restart kimi or not?", "ask"), ("restart kimi maybe? idk", "ask"),
    ("restart kimi tomorrow", "ask"), ("restart kimi when the load is done", "ask"),
    ("restart kimi if it's still hung in 10 min", "ask"), ("restart kimi in 10 min", "ask"),
    ("kimi needs a restart", "ask"), ("let's restart qwen", "ask"),
    ("don't restart kimi", "negated"), ("do NOT restart kimi, it's loading", "negated"),
    ("nobody restart qwen pls", "negated"), ("restart kimi… actually no, wait", "negated"),
    ("~bounce qwen~ nvm it recovered", "negated"), ("i wouldn't restart kimi right now", "negated"),
    ("hold off on restarting kimi", "negated"),
    # A negation in a part of its own governs the part after it.
    ("do not, under any circumstances, restart kimi", "negated"), ("never, ever bounce qwen", "negated"),
    ("please, please don't, i beg you, restart qwen", "negated"),
    # A later sentence that is only a negation takes it back; one that only waits, or a time in words, asks.
    ("restart kimi. actually, don't", "negated"), ("bounce qwen. no.", "negated"),
    ("restart kimi. wait", "ask"), ("restart qwen. hold on", "ask"), ("restart kimi in five minutes", "ask"),
    ("restart kimi in a couple of minutes", "ask"), ("restart qwen, wdyt", "ask"),
    ("restart kimi, pending approval", "ask"), ("restart kimi was a bad idea", "ask"),
    # Another place than this cluster: not an order for ours.
    ("restart kimi in staging", "ask"), ("bounce qwen on the other cluster", "ask"),
    # Quotation marks: said about, not said.
    ('he said "restart kimi"', "info"), ("'restart qwen' is what the alert said", "info"),
    ("“restart kimi”?", "info"),
    ("~restart kimi~", "info"), ("```restart kimi```", "info"), ("&gt; restart kimi\nis that all?", "info"),
    ("is it literally just `restart kimi`?", "info"), ("should we restart kimi", "info"),
    ("why did kimi restart", "info"), ("can I restart qwen", "info"), ("kimi restarted?", "info"),
])
def test_decide(text: str, decision: str) -> None:
    assert decide(text) == decision


def test_an_order_addressed_to_someone_else_is_not_one() -> None:
    w = words(read("<@U07OTHER> restart kimi pls", "slack", "U0BOT"))
    verb = next(t for t in w.tokens if t.norm == "restart")
    assert orders.decide(w, verb, set(), to_other=True) == "info"


def test_a_silence_keeps_its_duration() -> None:
    w = words(read("silence kimi for 2h planned work"))
    verb = w.tokens[0]
    assert orders.decide(w, verb, {1}, allow_time=True) == "order"
    w = words(read("silence kimi if it flaps again"))
    assert orders.decide(w, w.tokens[0], {1}, allow_time=True) == "ask"
