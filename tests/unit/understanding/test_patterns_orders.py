"""The router on the patterns people write (issue 23): what is an order and what leaves none: verbs,
requests in other languages, take-backs, conditions, later, doubt, negations, and questions about orders that
start nothing.

Sentences written for this test, not corpus lines; the config and the reading are in pattern_cases.py.
"""

from __future__ import annotations

import pytest

from bot.router import route
from bot.understanding.markup import read
from tests.unit.understanding.pattern_cases import ALIASES, BOT, CFG, expect, outcome


@pytest.mark.parametrize(("text", "service", "force"), [
    ("force-restart qwen", "qwen", True), ("hard-restart kimi pls", "kimi", False), ("re-start qwen", "qwen", False),
    ("stop and start kimi", "kimi", False), ("power-cycle qwen", "qwen", False), ("give kimi a kick", "kimi", False),
    ("do a clean restart of qwen", "qwen", False), ("<@U0BOT> trigger a restart of kimi", "kimi", False),
    ("relaunch the 32b", "qwen", False), ("kick off a restart of kimi", "kimi", False),
])
def test_compound_restart_verbs_are_orders(text: str, service: str, force: bool) -> None:
    expect(text, "restart", [service], order=True)
    assert outcome(text)[3].get("force", False) is force


@pytest.mark.parametrize(("text", "services"), [
    ("restart kimi, or is that overkill?", ["kimi"]), ("restart qwen. is that ok?", ["qwen"]),
    ("restart kimi unless someone objects", ["kimi"]), ("bounce qwen, good idea?", ["qwen"]),
    ("restart kimi at the top of the hour", ["kimi"]), ("restart qwen around 5pm", ["qwen"]),
    ("restart of kimi scheduled for tonight", ["kimi"]), ("restart kimi, said no one", ["kimi"]),
    ("<@U0BOT> <@U07ABCDEF> can you bounce qwen", ["qwen"]), ("reinicia kimi más tarde", ["kimi"]),
    ("tu peux redémarrer qwen demain ?", ["qwen"]), ("稍后重启 kimi", ["kimi"]), ("加载完之后再重启 qwen", ["qwen"]),
])
def test_doubt_time_and_someone_else_never_leave_an_order(text: str, services: list[str]) -> None:
    intent, got, order, _ = outcome(text)
    assert not order and intent == "restarts" and got == services, text


@pytest.mark.parametrize(("text", "service"), [
    ("tu peux redémarrer kimi ?", "kimi"), ("pouvez-vous redémarrer qwen", "qwen"),
    ("kannst du kimi neu starten?", "kimi"), ("¿puedes reiniciar qwen?", "qwen"), ("请重启 kimi", "kimi"),
    ("qwenを再起動してください", "qwen"),
])
def test_polite_requests_in_other_languages_are_orders(text: str, service: str) -> None:
    expect(text, "restart", [service], order=True)


@pytest.mark.parametrize(("text", "intent", "services", "order"), [
    ("kick the bench on qwen", "bench", ["qwen"], True), ("kick qwen, it's stuck", "restart", ["qwen"], True),
    ("kick off the benchmark for kimi", "bench", ["kimi"], True),
    ("don't run a bench on kimi", "bench", ["kimi"], False),
])
def test_a_verb_several_orders_share_is_the_order_its_object_names(text: str, intent: str, services: list[str],
                                                                   order: bool) -> None:
    expect(text, intent, services, order=order)


def test_a_question_about_doing_an_order_is_understood_as_it_and_starts_nothing() -> None:
    for text in ("should we bench kimi again", "what if we silenced qwen for the migration"):
        intent, _, order, _ = outcome(text)
        assert intent in ("bench", "silence") and not order, text


@pytest.mark.parametrize(("text", "services"), [
    ("restart qwen once the shards are all loaded", ["qwen"]), ("bounce kimi when its gpus are idle", ["kimi"]),
    ("should we restart qwen or just wait out the loading", ["qwen"]),
    ("do we bounce kimi or check its logs first", ["kimi"]),
])
def test_a_condition_or_an_alternative_after_an_order_is_context(text: str, services: list[str]) -> None:
    # What the condition or the alternative talks about (loading, gpus, logs) is not the question.
    intent, got, order, _ = outcome(text)
    assert (intent, got, order) == ("restarts", services, False), text


@pytest.mark.parametrize(("text", "intent", "services", "order"), [
    ("remove the silence on kimi", "unsilence", ["kimi"], True), ("cancel qwen's mute", "unsilence", ["qwen"], True),
    ("<@U0BOT> drop the snooze on kimi", "unsilence", ["kimi"], True),
    ("stop the alerts for qwen 1h", "silence", ["qwen"], True),
    ("don't lift the silence on kimi yet", "unsilence", ["kimi"], False),
])
def test_a_verb_that_undoes_with_the_silence_as_its_object_is_the_unsilence(text: str, intent: str,
                                                                          services: list[str], order: bool) -> None:
    expect(text, intent, services, order)


@pytest.mark.parametrize(("text", "intent"), [
    ("can we unlock kimi?", "unlock"), ("could we bench qwen this afternoon", "bench"),
    ("may i unsilence kimi", "unsilence"),
])
def test_can_we_asks_about_doing_an_order_and_starts_nothing(text: str, intent: str) -> None:
    got, _, order, _ = outcome(text)
    assert (got, order) == (intent, False), text


def test_do_it_after_an_order_said_as_a_noun_asks_back_and_never_confirms() -> None:
    for text in ("<@U0BOT> qwen needs a restart, please do it", "kimi could use a bounce. go ahead"):
        r = route(read(text, "slack", BOT), CFG, ALIASES)
        assert r.asked and r.note is not None and r.note.startswith("Did you want me to restart"), text
        assert not (r.command.confirm and not r.asked), text
    intent, _, order, args = outcome("qwen needs a restart, don't do it")
    assert (intent, order, args.get("negated")) == ("restarts", False, True)


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("ne touche pas à qwen, ne le redémarre pas", "restarts", ["qwen"]),
    ("don't touch kimi and don't restart it", "restarts", ["kimi"]),
])
def test_a_prohibition_is_about_the_order_it_forbids(text: str, intent: str, services: list[str]) -> None:
    expect(text, intent, services, negated=True)


@pytest.mark.parametrize(("text", "service"), [
    ("reinició qwen", "qwen"), ("reinicié kimi hace una hora", "kimi"), ("he reiniciado qwen", "qwen"),
    ("j'ai redémarré kimi", "kimi"), ("我重启了 qwen", "qwen"), ("kimiを再起動しました", "kimi"),
    ("qwen wurde neugestartet", "qwen"), ("¿quién reinició kimi?", "kimi"),
])
def test_a_restart_in_the_past_in_another_language_is_never_an_order(text: str, service: str) -> None:
    intent, services, order, _ = outcome(text)
    assert (intent, services, order) == ("restarts", [service], False), text


@pytest.mark.parametrize("text", ["reinicia kimi", "redémarre kimi", "请重启 kimi", "kimiを再起動して"])
def test_the_same_verbs_as_requests_are_still_orders(text: str) -> None:
    expect(text, "restart", ["kimi"], True)


def test_the_names_in_a_condition_after_an_order_are_not_its_targets() -> None:
    for text, service in (("restart qwen when kimi is done loading", "qwen"), ("bench kimi once qwen is idle", "kimi")):
        r = route(read(text, "terminal"), CFG, ALIASES)
        assert (r.named_services, r.asked) == ([service], True), text
        assert r.note is not None and f" {service}?" in r.note and "kimi qwen" not in r.note, text


@pytest.mark.parametrize(("text", "intent"), [
    ("<@U0BOT> bench finished on qwen. what were the numbers?", "throughput"),
    ("<@U0BOT> any ecc errors on gpu-a", "gpus"),
])
def test_a_report_of_an_order_asks_nothing_and_the_question_after_it_decides(text: str, intent: str) -> None:
    assert outcome(text)[0] == intent, text


@pytest.mark.parametrize(("text", "intent", "order"), [
    ("<@U0BOT> restart kimi...?", "restarts", False), ("restart qwen. . ?", "restarts", False),
    ("restart qwen soonish", "restarts", False), ("bounce kimi 5ish", "restarts", False),
    ("restart kimi...", "restart", True),
])
def test_a_question_mark_after_the_dots_and_a_rough_time_leave_no_order(text: str, intent: str, order: bool) -> None:
    got, _, got_order, _ = outcome(text)
    assert (got, got_order) == (intent, order), text


def test_one_order_wanted_as_a_noun_is_asked_back_and_its_history_is_not() -> None:
    for text in ("need a restart on qwen please", "kimi could use a bounce, please"):
        r = route(read(text, "terminal"), CFG, ALIASES)
        assert r.asked and r.note is not None and r.note.startswith("Did you want me to restart"), text
    for text in ("restart history for kimi please", "the last restart of qwen please"):
        r = route(read(text, "terminal"), CFG, ALIASES)
        assert (r.intent, r.asked) == ("restarts", False), text


@pytest.mark.parametrize("text", ["restart kimi :thinking_face:", "<@U0BOT> bounce qwen 🤷", "restart kimi... nah",
                                  "restart qwen post-lunch", "restart kimi pre-standup", "bounce qwen during the sync"])
def test_a_doubting_emoji_a_nah_and_an_event_to_wait_for_leave_no_order(text: str) -> None:
    assert not outcome(text)[2], text


@pytest.mark.parametrize("text", ["restart kimi l8r", "bounce qwen b4 standup", "restart kimi 2nite"])
def test_shorthand_for_later_leaves_no_order(text: str) -> None:
    assert not outcome(text)[2], text


@pytest.mark.parametrize(("text", "services"), [
    ("nobody touch kimi pls, i'm tracing it", ["kimi"]), ("hands off qwen until the eval is done", ["qwen"]),
    ("leave kimi alone", ["kimi"]), ("<@U0BOT> do not touch qwen", ["qwen"]),
])
def test_keeping_hands_off_a_service_is_a_negated_restart(text: str, services: list[str]) -> None:
    expect(text, "restarts", services, negated=True)


@pytest.mark.parametrize("text", ["<@U0BOT> :no_entry: restart kimi", "<@U0BOT> restart qwen :soon:",
                                  "restart kimi ⏳", "<@U0BOT> bounce qwen :x:", "restart kimi 🕝",
                                  "<@U0BOT> ✋ restart qwen"])
def test_an_emoji_that_says_no_or_later_leaves_no_order(text: str) -> None:
    assert not outcome(text)[2], text


@pytest.mark.parametrize("text", ["<@U0BOT> kimi's gone again :skull: restart it", "<@U0BOT> restart qwen :pray:",
                                  "<@U0BOT> :rotating_light: restart kimi"])
def test_an_emoji_between_sentences_parts_them_and_a_plea_is_still_an_order(text: str) -> None:
    assert outcome(text)[2], text


@pytest.mark.parametrize(("text", "services"), [
    ("kimi stuck at cuda graph capture for 40 min, bounce it", ["kimi"]),
    ("qwen's logs are full of nccl timeouts, restart it pls", ["qwen"]),
])
def test_a_statement_then_the_order_with_it_is_the_order(text: str, services: list[str]) -> None:
    expect(text, "restart", services, order=True)


def test_two_orders_the_second_with_it_keep_the_first() -> None:
    assert outcome("restart qwen, then bench it")[0] == "restart"


@pytest.mark.parametrize("text", ["restart qwen, please don't", "bounce kimi, better not",
                                  "qwen neu starten, bitte nicht",
                                  "reinicia qwen, mejor no", "redémarre qwen, non", "重启 qwen，算了",
                                  "qwenを再起動、やっぱりやめて", "restart qwen, no rush"])
def test_a_take_back_after_a_comma_leaves_no_order(text: str) -> None:
    assert not outcome(text)[2], text


@pytest.mark.parametrize("text", ["restart kimi, not qwen", "qwen is not responding, restart it",
                                  "qwen hung -> restart", "kimi wedged => bounce it"])
def test_a_negation_elsewhere_and_an_arrow_keep_the_order(text: str) -> None:
    assert outcome(text)[2], text


@pytest.mark.parametrize("text", ["kimiは再起動しなくていい", "qwenは再起動しなくても大丈夫", "qwenの再起動は必要ない",
                                  "kimi 不用重启", "没必要重启 qwen"])
def test_no_need_to_restart_in_japanese_and_chinese_is_a_negation(text: str) -> None:
    intent, _, order, args = outcome(text)
    assert (intent, order, args.get("negated")) == ("restarts", False, True), text


def test_a_lock_said_to_be_stuck_is_about_the_lock_never_an_order() -> None:
    intent, services, order, _ = outcome("qwen's restart lock is stuck since this morning")
    assert (intent in ("unlock", "restarts"), services, order) == (True, ["qwen"], False)


@pytest.mark.parametrize("text", ["restart qwen... no, forget it", "bounce kimi. forget that"])
def test_forget_it_takes_an_order_back(text: str) -> None:
    assert not outcome(text)[2], text


@pytest.mark.parametrize("text", ["restart qwen please, it's at 0 tok/s", "bounce kimi, it's stuck at 95%"])
def test_a_measure_after_at_is_no_time(text: str) -> None:
    assert outcome(text)[2], text


@pytest.mark.parametrize("text", ["restart qwen, assuming it's idle", "bounce kimi provided the eval is over",
                                  "restart qwen as long as nobody objects", "reinicia kimi, o mejor no",
                                  "等会儿重启 kimi", "restart qwen iff it hangs"])
def test_a_condition_or_a_later_in_other_words_leaves_no_order(text: str) -> None:
    assert not outcome(text)[2], text


@pytest.mark.parametrize("text", ["restart qwen in the event it hangs again", "bounce kimi should the load stall",
                                  "restart qwen subject to approval", "restart kimi, contingent on the eval",
                                  "restart qwen kinda", "bounce kimi, sort of", "restart qwen tmw",
                                  "restart kimi within the hour", "bounce qwen, on hold", "restart kimi tbd"])
def test_conditions_deadlines_and_half_meant_orders_leave_no_order(text: str) -> None:
    assert not outcome(text)[2], text


def test_a_remark_after_an_order_keeps_it() -> None:
    assert outcome("restart kimi, it should be quick")[2]


@pytest.mark.parametrize("text", ["worst case, bounce qwen", "in theory, restart kimi", "alternatively, restart qwen",
                                  "in 20 min, restart kimi", "可能要重启 qwen", "たぶん qwenを再起動"])
def test_a_time_or_a_maybe_before_the_order_leaves_no_order(text: str) -> None:
    assert not outcome(text)[2], text


def test_a_length_in_the_statement_before_an_order_keeps_it() -> None:
    assert outcome("qwen has been down for an hour, restart it")[2]


def test_stuck_in_a_loop_before_an_order_is_no_time() -> None:
    assert outcome("qwen is stuck in a loop, restart it")[2]


@pytest.mark.parametrize(("text", "intent"), [("is it ok to restart qwen now", "restarts"),
                                              ("fine to restart kimi?", "restarts"), ("is qwen ok", "status")])
def test_ok_to_restart_asks_whether_one_may(text: str, intent: str) -> None:
    intent_got, _, order, _ = outcome(text)
    assert (intent_got, order) == (intent, False), text


def test_how_long_until_one_may_restart_is_about_restarts() -> None:
    assert outcome("how long until we can restart qwen again")[0] == "restarts"
    assert outcome("how long until qwen is ready")[0] == "status"
