"""Mentions the bot makes itself: the only Slack markup that may ever be live.

Text from a node, a unit, the store or a person is inert in Slack: the Slack renderer escapes ``&``, ``<``
and ``>`` in every string it is given. A mention the bot means — the person who asked, a confirmer, a user
group or channel from the config — is written with :func:`user`, :func:`channel` or :func:`usergroup`,
which validate the id and return a *marker*: the kind and id between two private-use characters, sealed
with a random key made when this process started. Only the Slack renderer turns a marker into ``<@U…>``
(:func:`split`); every other output (terminal, ``--json``, the audit rows in the store) shows it as the inert
text ``<@U…>`` (:func:`plain`).

Why a key: handlers build sentences with f-strings that mix their own words with node text, so the
renderer cannot know which part came from where. Node, store and user text never holds this process's
key (it is never written anywhere: :func:`plain` drops it), so it cannot forge a marker; a stray
private-use character in node text stays an inert character.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Literal

MentionKind = Literal["user", "channel", "usergroup"]

_OPEN, _CLOSE = "\ue000", "\ue001"
_KEY = os.urandom(8).hex()
_SIGIL: dict[MentionKind, str] = {"user": "@", "channel": "#", "usergroup": "^"}
_KIND = {v: k for k, v in _SIGIL.items()}
_IDS: dict[MentionKind, re.Pattern[str]] = {
    "user": re.compile(r"[UW][A-Z0-9]{2,30}"),
    "channel": re.compile(r"[CGD][A-Z0-9]{2,30}"),
    "usergroup": re.compile(r"S[A-Z0-9]{2,30}"),
}
PATTERN = _OPEN + _KEY + r"([@#^])([A-Z0-9]{3,31})" + _CLOSE
"""The regular expression of one marker (for a handler that drops a mention from a title)."""
_MARKER = re.compile(PATTERN)


@dataclass(frozen=True, slots=True)
class Mention:
    """One mention the bot built from an id it chose."""

    kind: MentionKind
    id: str

    @property
    def markup(self) -> str:
        """Slack's markup for it: ``<@U…>``, ``<#C…>``, ``<!subteam^S…>``."""
        if self.kind == "user":
            return f"<@{self.id}>"
        if self.kind == "channel":
            return f"<#{self.id}>"
        return f"<!subteam^{self.id}>"


def _marker(kind: MentionKind, ident: str | None) -> str | None:
    if ident is None or not _IDS[kind].fullmatch(ident):
        return None
    return f"{_OPEN}{_KEY}{_SIGIL[kind]}{ident}{_CLOSE}"


def user(user_id: str | None, otherwise: str = "someone") -> str:
    """A live mention of ``user_id`` in Slack (``otherwise`` when it is not a Slack user id, e.g. "terminal")."""
    return _marker("user", user_id) or (user_id or otherwise)


def channel(channel_id: str | None, otherwise: str = "a channel") -> str:
    """A live link to ``channel_id`` in Slack (``otherwise`` when it is not a channel id)."""
    return _marker("channel", channel_id) or (channel_id or otherwise)


def usergroup(group_id: str | None, otherwise: str = "a user group") -> str:
    """A live mention of the user group ``group_id`` in Slack (``otherwise`` when it is not a group id)."""
    return _marker("usergroup", group_id) or (group_id or otherwise)


def present(text: str) -> bool:
    """Whether ``text`` may hold a marker (a quick test before :func:`split`)."""
    return _OPEN in text


def split(text: str) -> list[str | Mention]:
    """``text`` as its literal pieces and the mentions between them, in order."""
    if _OPEN not in text:
        return [text]
    out: list[str | Mention] = []
    at = 0
    for m in _MARKER.finditer(text):
        if m.start() > at:
            out.append(text[at:m.start()])
        out.append(Mention(_KIND[m.group(1)], m.group(2)))
        at = m.end()
    if at < len(text):
        out.append(text[at:])
    return out


def plain(text: str) -> str:
    """``text`` with every marker shown as its markup (``<@U…>``): for terminals, JSON, logs and the store."""
    if _OPEN not in text:
        return text
    return _MARKER.sub(lambda m: Mention(_KIND[m.group(1)], m.group(2)).markup, text)


def plain_data(value: object) -> object:
    """``value`` (JSON-like data) with :func:`plain` applied to every string in it."""
    if isinstance(value, str):
        return plain(value)
    if isinstance(value, dict):
        return {k: plain_data(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain_data(v) for v in value]
    return value
