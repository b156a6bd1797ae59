"""journalctl's ``-o json`` lines and what each says to the watchers (pure functions, no I/O).

One JSON object a line. journald adds ``__CURSOR``, ``__REALTIME_TIMESTAMP``, ``__MONOTONIC_TIMESTAMP`` and
``_BOOT_ID`` to every entry whatever ``--output-fields`` asks; the fields come in no fixed order. A field
that is not printable UTF-8 — vLLM's progress lines carry carriage returns — is an array of byte values,
and without ``--all`` a field of 4 KiB or more is ``null``. The service manager's lines about a unit come
from PID 1 (``_PID=1``, ``_SYSTEMD_UNIT=init.scope``) and name the unit in ``UNIT=`` and its run in
``INVOCATION_ID=``; the unit's own output names them in ``_SYSTEMD_UNIT=`` and ``_SYSTEMD_INVOCATION_ID=``.

What a line says is read with the patterns the poll's parsers use (``services/parse/vllm_log.py`` for the
unit's output, ``services/parse/systemd.py`` for PID 1's lines), and :data:`GREP` is their union, so that
the node sends only those lines.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Literal

from services.parse.systemd import UNIT_LINES, unit_line
from services.parse.vllm_log import LINE_MARKERS, line_marker

__all__ = ["FIELDS", "GREP", "EventKind", "JournalEntry", "parse_entry"]

EventKind = Literal["ready", "load_failed", "engine_died", "main_exited", "unit_changed"]
FIELDS = ("MESSAGE", "UNIT", "_SYSTEMD_UNIT", "INVOCATION_ID", "_SYSTEMD_INVOCATION_ID", "_PID")
"""The fields asked for (``--output-fields``): the message, whose unit and run it is, and who wrote it."""
_CURSOR = re.compile(r"[0-9a-z=;]{1,512}")
"""journald's cursors (``s=…;i=…;b=…;m=…;t=…;x=…``) are made of these only: anything else is not one."""


def _pcre(pattern: re.Pattern[str]) -> str:
    # Python's inline case-insensitive group reads the same in PCRE2, which journalctl's --grep uses.
    return f"(?i:{pattern.pattern})" if pattern.flags & re.IGNORECASE else f"(?:{pattern.pattern})"


GREP = "|".join(_pcre(p) for _, p in (*LINE_MARKERS, *UNIT_LINES))
"""Every line an event is read from, as one PCRE2 pattern for ``journalctl --grep`` (the node filters)."""


@dataclass(frozen=True)
class JournalEntry:
    """One journal entry of a watched unit, and the event it is (None: a line that says nothing to act on)."""

    cursor: str
    realtime_us: int
    unit: str
    invocation: str
    by_systemd: bool  # PID 1's line about the unit, not the unit's own output
    message: str
    event: EventKind | None


def valid_cursor(text: str) -> bool:
    """True when ``text`` has the shape of a journald cursor (nothing a shell or journalctl would misread)."""
    return _CURSOR.fullmatch(text) is not None


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list):  # not printable UTF-8: the bytes, one number each
        try:
            return bytes(v for v in value if isinstance(v, int)).decode("utf-8", "replace")
        except ValueError:  # a value out of 0..255 is not what journalctl writes
            return ""
    return ""


def parse_entry(line: str | bytes, units: frozenset[str]) -> JournalEntry | None:
    """The entry on one line of ``journalctl -o json`` if it is about one of ``units``, else None.

    A line that is not a JSON object with a cursor (a truncated line, a message journalctl printed on its
    standard output) is None, as is an entry of another unit.
    """
    try:
        obj = json.loads(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    cursor = obj.get("__CURSOR")
    if not isinstance(cursor, str) or not valid_cursor(cursor):
        return None
    by_systemd = obj.get("_PID") == "1" and isinstance(obj.get("UNIT"), str)
    unit = _text(obj.get("UNIT") if by_systemd else obj.get("_SYSTEMD_UNIT"))
    if unit not in units:
        return None
    message = _text(obj.get("MESSAGE"))
    invocation = _text(obj.get("INVOCATION_ID") if by_systemd else obj.get("_SYSTEMD_INVOCATION_ID"))
    try:
        realtime_us = int(str(obj.get("__REALTIME_TIMESTAMP", "0")))
    except ValueError:
        realtime_us = 0
    event: EventKind | None = unit_line(message) if by_systemd else line_marker(message)
    return JournalEntry(cursor=cursor, realtime_us=realtime_us, unit=unit, invocation=invocation,
                        by_systemd=by_systemd, message=message, event=event)
