"""The router on the patterns people write (issue 23): names of services, nodes and command words as people
type them: nicknames, typos, letters left out or typed twice, shorthand, and foreign words that are no unknown
name.

Sentences written for this test, not corpus lines; the config and the reading are in pattern_cases.py.
"""

from __future__ import annotations

import pytest

from bot.router import route
from bot.understanding.markup import read
from tests.unit.understanding.pattern_cases import ALIASES, CFG, expect, outcome


@pytest.mark.parametrize(("text", "services"), [("is the 32b up", ["qwen"]), ("how's k25 doing", ["kimi"]),
                                                ("is the int4 one loaded", ["kimi"]), ("the 1T model status", [])])
def test_model_nicknames(text: str, services: list[str]) -> None:
    expect(text, "status", services)


@pytest.mark.parametrize(("text", "services"), [("welche flags verwendet kimi", ["kimi"]),
                                                ("¿qué flags usa qwen?", ["qwen"])])
def test_verbs_of_using_in_other_languages_are_no_names(text: str, services: list[str]) -> None:
    r = route(read(text, "terminal"), CFG, ALIASES)
    assert (r.intent, sorted(r.named_services), r.unknown) == ("settings", services, []), text


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("qwen sttngs", "settings", ["qwen"]), ("lgs for kimi", "logs", ["kimi"]), ("stts qwen?", "status", ["qwen"]),
    ("how's kimi's thrpt", "throughput", ["kimi"]),
])
def test_a_command_word_without_its_vowels_is_that_word(text: str, intent: str, services: list[str]) -> None:
    expect(text, intent, services)


@pytest.mark.parametrize(("text", "services", "order"), [
    ("bounce qwn", ["qwen"], True), ("is kmi up", ["kimi"], False), ("status of qen", ["qwen"], False),
])
def test_a_four_letter_name_missing_an_inner_letter_is_that_name(text: str, services: list[str], order: bool) -> None:
    intent = "restart" if order else "status"
    expect(text, intent, services, order)


def test_a_name_missing_its_first_or_last_letter_is_not_that_name() -> None:
    assert outcome("is kim up")[1] == [] and outcome("is wen up")[1] == []


@pytest.mark.parametrize(("text", "intent", "services"), [
    ("what can u do", "help", []), ("r we live on qwen", "status", ["qwen"]),
    ("kimi launch cmd", "settings", ["kimi"]), ("what changed on qwen since yday", "changes", ["qwen"]),
])
def test_chat_shorthand_is_the_word_it_stands_for(text: str, intent: str, services: list[str]) -> None:
    expect(text, intent, services)


@pytest.mark.parametrize(("text", "services"), [
    ("logs for qweb", ["qwen"]), ("is kimo up", ["kimi"]), ("settings kimu", ["kimi"]), ("qwrn status", ["qwen"]),
])
def test_a_short_name_with_a_neighbouring_key_hit_is_that_name(text: str, services: list[str]) -> None:
    assert outcome(text)[1] == services, text


def test_a_short_name_with_a_far_key_hit_is_not_that_name() -> None:
    assert outcome("is kiri up")[1] == [] and outcome("status of qwer")[1] == []


@pytest.mark.parametrize("text", ["are the cards on gpu-b overheating", "is gpu-a throttling", "gpus spiking?"])
def test_an_english_word_with_an_ending_is_not_an_unknown_name(text: str) -> None:
    assert route(read(text, "terminal"), CFG, ALIASES).unknown == [], text


@pytest.mark.parametrize(("text", "nodes"), [
    ("gpub status", ["gpu-b"]), ("logs on gpu_a", ["gpu-a"]), ("is gpu.b up", ["gpu-b"]),
])
def test_a_node_with_its_joiner_left_out_or_changed_is_that_node(text: str, nodes: list[str]) -> None:
    r = route(read(text, "terminal"), CFG, ALIASES)
    assert (sorted(r.named_nodes), r.unknown) == (nodes, []), text


def test_another_node_without_its_joiner_is_still_unknown() -> None:
    assert route(read("gpuc status", "terminal"), CFG, ALIASES).unknown == ["gpuc"]


@pytest.mark.parametrize("text", ["what swap backend does qwen use", "which attention backend env is on qwen"])
def test_a_settings_word_where_a_name_could_stand_is_no_unknown_name(text: str) -> None:
    assert route(read(text, "terminal"), CFG, ALIASES).unknown == [], text


@pytest.mark.parametrize(("text", "nodes", "services"), [
    ("gpu-bb status", ["gpu-b"], []), ("logs on gpu-aa", ["gpu-a"], []), ("qwenn status", [], ["qwen"]),
])
def test_a_letter_typed_twice_is_still_the_name(text: str, nodes: list[str], services: list[str]) -> None:
    r = route(read(text, "terminal"), CFG, ALIASES)
    assert (sorted(r.named_nodes), sorted(r.named_services), r.unknown) == (nodes, services, []), text


def test_a_german_adverb_is_no_unknown_name() -> None:
    assert route(read("qwen startet immer wieder neu, warum?", "terminal"), CFG, ALIASES).unknown == []


def test_a_short_alias_beside_another_is_no_unknown_name() -> None:
    assert route(read("what's qwen's tp and pp", "terminal"), CFG, ALIASES).unknown == []


@pytest.mark.parametrize(("text", "intent"), [("qwen envv", "settings"), ("kimi logss", "logs"),
                                             ("gpuss on qwen", "gpus")])
def test_a_short_command_word_with_a_letter_typed_twice(text: str, intent: str) -> None:
    assert outcome(text)[0] == intent, text


def test_french_rien_is_no_unknown_name() -> None:
    assert route(read("ne redémarre rien ce soir", "terminal"), CFG, ALIASES).unknown == []


def test_team_shorthand_is_no_unknown_name() -> None:
    for text in ("todo restart qwen", "qwen logs grep nccl"):
        assert route(read(text, "terminal"), CFG, ALIASES).unknown == [], text


def test_spanish_nada_is_no_unknown_name() -> None:
    assert route(read("no reinicies nada hoy", "terminal"), CFG, ALIASES).unknown == []
