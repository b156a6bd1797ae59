"""bot/understanding/markup.py and text.py: Slack's markup read once, with its structure; words and clauses."""

from __future__ import annotations

from bot.understanding.markup import read
from bot.understanding.text import words


def test_entities_links_emoji_and_marks() -> None:
    m = read("<@U0BOT> is *kimi* up? :eyes: <https://grafana/d/x|dashboard> <#C1|ops> <!here> 👋", "slack", "U0BOT")
    assert m.plain.split() == ["is", "kimi", "up?", "dashboard"]
    assert m.emoji[0] == "eyes" and len(m.emoji) == 2 and not m.to_other
    m = read("&gt; restart kimi\n~bounce qwen~ `restart kimi` &amp; ```x\ny```", "slack")
    marked = [(s.text.strip(), s.quoted, s.struck, s.code) for s in m.segments if s.marked]
    assert marked == [("restart kimi", True, False, False), ("bounce qwen", False, True, False),
                      ("restart kimi", False, False, True), ("x\ny", False, False, True)]
    assert "&" in m.plain  # entities undone after the structure was read


def test_the_terminal_is_read_as_typed() -> None:
    m = read("status &gt; kimi", "terminal")
    assert "&gt;" in m.plain  # nothing to unescape in a terminal


def test_words_clauses_possessives_and_assignments() -> None:
    w = words(read("kimi's tp? also NCCL_PROTO=LL on gpu-a. restart it"))
    assert [t.norm for t in w.tokens] == ["kimi", "tp", "also", "nccl_proto", "ll", "on", "gpu-a", "restart", "it"]
    assert w.tokens[0].possessive and w.tokens[3].raw == "NCCL_PROTO"
    assert [c.question for c in w.clauses] == [True, False, False] and len(w.clauses) == 3
    assert w.assignments == ((3, "LL"),)
    assert words(read("settings")).tokens[0].stem == "set" and words(read("restarted")).tokens[0].stem == "restart"


def test_a_mention_beside_the_bots_is_seen() -> None:
    m = read("<@U0BOT> <@U07ANIKA> can you bounce qwen", "slack", "U0BOT")
    assert m.beside_other and not m.to_other
    assert not read("<@U0BOT> can you bounce qwen", "slack", "U0BOT").beside_other


def test_compounds_and_joined_questions() -> None:
    from bot.understanding.text import compound_parts

    assert compound_parts("force-restart") == ["force", "restart"]
    assert compound_parts("re-start") == ["restart"]
    assert compound_parts("gpu-c") == ["gpu-c"] and compound_parts("kimi-k2.5") == ["kimi-k2.5"]
    assert compound_parts("ttft/itl") == ["ttft", "itl"] and compound_parts("tok/s") == ["tok/s"]
    w = words(read("is kimi up and what's its tp"))
    assert len(w.clauses) == 2 and [t.norm for t in w.clause_tokens(1)][:2] == ["and", "what"]
    w = words(read("1) is kimi loaded 2) what's NCCL_ALGO"))
    assert len(w.clauses) == 2


def test_words_in_quotation_marks_are_quoted_and_apostrophes_are_not() -> None:
    m = read('the alert said "restart kimi" and it\'s qwen\'s turn to \'bounce\'', "slack")
    assert [(s.text, s.quoted) for s in m.segments] == [
        ("the alert said ", False), ("restart kimi", True), (" and it's qwen's turn to ", False), ("bounce", True)]
