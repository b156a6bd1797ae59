"""The router on the understanding corpus (issue 23): ≥ 95 % of messages get the answer asked for (intent and
targets right), and no message that is not an order reaches a confirmation — on the Slack path (through the
same markup reading the live app uses) and the terminal alike.

The corpus (``corpus.jsonl``) was written independently of the router, against the demo cluster
(``cluster.toml``); ``python -m bench.understanding`` prints the table by intent and by kind of phrasing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.understanding import BOT_USER_ID, ORDERS, SERVED, Results, config, evaluate, load_rows
from bot.router import route
from bot.understanding.markup import Surface, read
from bot.understanding.names import service_aliases


@pytest.fixture(scope="module")
def results() -> Results:
    return evaluate()


def test_the_corpus_is_the_one_the_issue_asks_for() -> None:
    rows = load_rows()
    assert len(rows) >= 500
    assert {r["surface"] for r in rows} == {"slack", "terminal"}


def test_at_least_95_percent_get_the_answer_asked_for(results: Results) -> None:
    for surface in ("slack", "terminal"):
        got = [o for o in results.outcomes if o.row["surface"] == surface]
        assert results.accuracy(got) >= 0.95, (surface, [o.row["id"] for o in got if not o.ok])
    assert results.accuracy() >= 0.95


def test_no_message_that_is_not_an_order_reaches_a_confirmation(results: Results) -> None:
    wrong = [(o.row["id"], o.row["text"], o.intent) for o in results.false_orders]
    assert wrong == []
    # ... and the orders themselves still are orders (a router that never acts would pass the line above).
    orders = [o for o in results.outcomes if o.row["order"]]
    # (An order the label also lets the bot ask back about — "let's restart kimi" — may be asked.)
    assert orders and all(o.intent in ORDERS or o.asked for o in orders if o.ok)
    assert sum(o.order for o in orders) >= 0.95 * len(orders)


def _lines(name: str) -> list[str]:
    return [line.replace("\\n", "\n") for line in (Path(__file__).parent / name).read_text().splitlines() if line]


def _is_order(text: str, surface: Surface) -> bool:
    cfg = config()
    r = route(read(text, surface, BOT_USER_ID if surface == "slack" else None), cfg, service_aliases(cfg, SERVED))
    return r.command.confirm and not r.asked and r.matched


def test_the_ways_of_not_ordering_a_restart_never_reach_a_confirmation() -> None:
    # not_orders.txt: questions, doubts, times, conditions, negations, retractions, quotes, code, strikes, reports,
    # announcements, what-ifs, other places, someone else addressed, in six languages (written for this test).
    wrong: list[tuple[Surface, str]] = []
    for text in _lines("not_orders.txt"):
        if _is_order(f"<@{BOT_USER_ID}> {text}", "slack"):
            wrong.append(("slack", text))
        if "&gt;" not in text and "<@" not in text and _is_order(text, "terminal"):  # Slack markup: Slack only
            wrong.append(("terminal", text))
    assert wrong == []


def test_the_ways_of_ordering_a_restart_are_orders() -> None:
    # orders.txt: the same verbs as plain orders (a router that never acts would pass the test above).
    missed = [text for text in _lines("orders.txt") if not _is_order(f"<@{BOT_USER_ID}> {text}", "slack")
              or not _is_order(text, "terminal")]
    assert missed == []


def test_an_order_followed_by_a_time_a_doubt_or_a_take_back_is_never_one() -> None:
    # not_order_suffixes.txt: what may follow "restart kimi" in the same part, after a comma, a dash, or as a
    # sentence of its own, and make it no order now (times, conditions, doubts, emoji, jokes, take-backs).
    texts = [verb + sep + suffix for suffix in _lines("not_order_suffixes.txt")
             for verb in ("restart kimi", "bounce qwen") for sep in (" ", ", ", ". ", " - ")]
    wrong = [text for text in texts if _is_order(f"<@{BOT_USER_ID}> {text}", "slack")]
    assert wrong == []


def test_what_before_an_order_makes_it_no_order_never_leaves_one() -> None:
    # not_order_prefixes.txt: doubts, questions, times, conditions, negations, plans, notes and someone's line
    # ("bob: restart kimi") before every order's verb.
    texts = [f"{prefix} {verb}" for prefix in _lines("not_order_prefixes.txt")
             for verb in ("restart kimi", "bounce qwen", "bench kimi", "unlock qwen", "unsilence kimi",
                          "silence kimi 2h")]
    wrong = [text for text in texts if _is_order(f"<@{BOT_USER_ID}> {text}", "slack") or _is_order(text, "terminal")]
    assert wrong == []


def test_the_other_orders_followed_by_a_time_a_doubt_or_a_take_back_are_never_orders() -> None:
    # The same suffixes after a benchmark, an unlock, an unsilence and a silence with its length (whose reason
    # follows it: "in case it hangs" is a reason, and stays an order).
    texts = [verb + sep + suffix for suffix in _lines("not_order_suffixes.txt") if suffix != "in case it hangs"
             for verb in ("bench kimi", "unlock qwen", "unsilence kimi", "silence kimi 2h")
             for sep in (" ", ", ", ". ", " - ")]
    wrong = [text for text in texts if _is_order(f"<@{BOT_USER_ID}> {text}", "slack")]
    assert wrong == []
    for text in ("silence kimi 2h planned driver update", "silence qwen 1h no pages during the upgrade",
                 "silence kimi 2h in case it hangs", "silence qwen for 2 hours, driver upgrade"):
        assert _is_order(f"<@{BOT_USER_ID}> {text}", "slack"), text
