"""Text bound for a terminal: control characters shown as visible escapes, never obeyed.

What nodes say (journal lines, flag and environment values, unit text, process names, error messages that
quote any of them) may carry escape sequences: ``ESC]0;`` sets the window title, ``ESC]52;`` writes the
clipboard, ``ESC[2J`` clears the screen; C1 controls (U+0080–U+009F: U+009B is a one-character CSI) and
bidirectional overrides (U+202A–U+202E, U+2066–U+2069) act, or reorder what is shown, too. Everything
printed for a person passes through :func:`shown` (tab and newline, which lay the text out, are kept) or
:func:`shown_line` (one line: those are shown too), and every JSON document printed (``--json``, the log)
through :func:`json_shown`. The forms are Python's and JSON's own: ``\\x1b``, ``\\r``, ``\\x9b``,
``\\u202e``. The bot's own control sequences (the live progress line's carriage return and erase-line)
are added after, around text that went through here.
"""

from __future__ import annotations

import re

_CONTROLS = "\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069"
_CONTROL = re.compile(f"[{_CONTROLS}]")
_LINE_CONTROL = re.compile(f"[\t\n{_CONTROLS}]")
# json.dumps escapes C0 (and with ensure_ascii every non-ASCII character); with ensure_ascii=False it writes
# DEL, C1 and the bidirectional controls raw. They can only occur inside JSON strings, where \uXXXX is the same.
_JSON_RAW = re.compile("[\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _visible(m: re.Match[str]) -> str:
    c = m.group()
    named = _NAMED.get(c)
    if named is not None:
        return named
    return f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}"


def has_controls(text: str) -> bool:
    """True when :func:`shown` would change ``text``."""
    return _CONTROL.search(text) is not None


def shown(text: str) -> str:
    """``text`` with every control character but tab and newline written visibly (``ESC`` → ``\\x1b``)."""
    return _CONTROL.sub(_visible, text)


def shown_line(text: str) -> str:
    """``text`` as one line: every control character written visibly, tab and newline included."""
    return _LINE_CONTROL.sub(_visible, text)


def json_shown(document: str) -> str:
    """A JSON document from ``json.dumps(…, ensure_ascii=False)`` with DEL, C1 and bidi controls as ``\\u``
    escapes: the same JSON value, nothing a terminal obeys."""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", document)
