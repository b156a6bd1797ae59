"""bot/terminal.py: text from nodes is shown, never obeyed, in what a person's terminal prints.

The truth is outside the module: what a terminal acts on is C0 but tab and newline, DEL, C1 (ECMA-48) and the
bidirectional overrides (Unicode UAX #9), listed here by hand; the visible form is the one Python's own
``repr`` writes, and a JSON document must stay the same JSON value for ``json.loads``.
"""

from __future__ import annotations

import json

import pytest

from bot.terminal import has_controls, json_shown, shown, shown_line

OBEYED = [*map(chr, range(0x00, 0x09)), *map(chr, range(0x0B, 0x20)), *map(chr, range(0x7F, 0xA0)),
          *map(chr, range(0x202A, 0x202F)), *map(chr, range(0x2066, 0x206A))]
HARMLESS = ["a", " ", "é", "€", "你", "🚀", "\u200b", "\u2060", "\u00a0", "\u206a"]
NODE_SAYS = "title \x1b]0;pwned\x07 clip \x1b]52;c;cHduZWQ=\x07 clear \x1b[2J c1 \x9b2J bidi \u202eend cr \rover"


@pytest.mark.parametrize("c", OBEYED, ids=lambda c: f"U+{ord(c):04X}")
def test_every_control_a_terminal_obeys_is_written_as_python_writes_it(c: str) -> None:
    assert has_controls(c)
    assert shown(c) == shown_line(c) == repr(c)[1:-1]
    assert not any(ch in OBEYED for ch in shown(f"x{c}y"))


@pytest.mark.parametrize("c", HARMLESS, ids=lambda c: f"U+{ord(c):04X}")
def test_printable_text_is_left_alone(c: str) -> None:
    assert not has_controls(c)
    assert shown(c) == shown_line(c) == c


def test_tab_and_newline_lay_text_out_but_are_shown_in_one_line() -> None:
    text = "a\tb\nc"
    assert not has_controls(text) and shown(text) == text
    assert shown_line(text) == "a\\tb\\nc"


def test_a_nodes_journal_line_with_escape_sequences_prints_inert() -> None:
    out = shown(NODE_SAYS)
    assert out == ("title \\x1b]0;pwned\\x07 clip \\x1b]52;c;cHduZWQ=\\x07 clear \\x1b[2J c1 \\x9b2J "
                   "bidi \\u202eend cr \\rover")
    assert not any(ch in OBEYED for ch in out)


def test_a_json_document_keeps_its_value_and_carries_nothing_a_terminal_obeys() -> None:
    value = {"log": [NODE_SAYS, "ok\ttab"], "env": {"EVIL\x9b": "\u2066x\u2069"}, "plain": "tok/s 你好 🚀"}
    document = json.dumps(value, ensure_ascii=False)
    assert any(ch in OBEYED for ch in document)  # json.dumps alone writes DEL, C1 and bidi raw
    printed = json_shown(document)
    assert not any(ch in OBEYED for ch in printed)
    assert json.loads(printed) == value
    assert "你好 🚀" in printed  # non-ASCII text stays readable
