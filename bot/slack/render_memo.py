"""One rendering for the copies of one shared answer posted at the same time (``bot/shared_answers.py``).

People asking the same question at once get copies of one reply: the same sections (the very objects), the
same title and buttons. Drawing it for Slack once per asker would cost each of them the whole render again,
so the messages drawn for the first copy are posted for every copy being posted meanwhile. A reply is
recognised by the identity of its sections, which the entry keeps alive (so no other reply can take their
ids) and which nobody changes once a handler made them; a reply the dispatcher added a section to for one
asker differs from the others. The entry goes when its last copy has been posted.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from bot.slack.blocks import SlackMessage, render_messages
from handlers.reply import Reply

_Key = tuple[str, str, str, tuple[int, ...], tuple[tuple[str, str, str, str | None], ...]]


def _key(reply: Reply) -> _Key:
    return (reply.intent, reply.title, reply.status, tuple(id(s) for s in reply.sections),
            tuple((a.action_id, a.text, a.value, a.style) for a in reply.actions))


@dataclass
class _Entry:
    reply: Reply  # holds the sections, so their ids stay theirs while the entry lives
    messages: list[SlackMessage]
    posting: int = 0


class RenderMemo:
    """The Slack messages of the answers being posted now, by reply."""

    def __init__(self) -> None:
        self._live: dict[_Key, _Entry] = {}
        self.renders = 0  # replies drawn (the benchmark reports how many posts shared one)

    @contextlib.contextmanager
    def messages(self, reply: Reply) -> Iterator[list[SlackMessage]]:
        """The reply's messages (without attachments: they are uploaded), drawn unless a copy of the same reply
        is being posted; hold them while posting."""
        key = _key(reply)
        entry = self._live.get(key)
        if entry is None:
            entry = _Entry(reply, render_messages(reply, attachments=False))
            self.renders += 1
            self._live[key] = entry
        entry.posting += 1
        try:
            yield entry.messages
        finally:
            entry.posting -= 1
            if entry.posting == 0 and self._live.get(key) is entry:
                del self._live[key]
