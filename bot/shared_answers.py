"""One answer for the same question asked at once: concurrent askers of the same question share one Reply.

The same question is the same command, the same targets and the same typed arguments, read the same way
(the note and the commands offered with the answer), for the same surface and the same kind of reply
(``Context.service_data``), of a command whose answer does not depend on who asks (:data:`SHARED_COMMANDS`):
the live-state and read-only questions. Everything else is answered for each asker: help (it hides what the
asker may not run), the questions about restarts ("whether you may"), every order (restart, bench,
silence, unsilence, unlock: each is the asker's own, checked and audited as theirs), small talk and the
short answers of the dispatcher itself (an unknown name, a question back, nothing understood), which cost
nothing to make again.

Only questions in flight together share: the first asker's handler runs, and every asker who arrives with
the same question before it ends waits for it and gets a copy of its reply (its own lists and ``data``: the
dispatcher and the front ends add to a reply). A question asked once that answer is made runs the handler
again, so no answer is older than the question. When the first asker's question is called off, those who
waited ask again; when its handler fails, each of them gets the dispatcher's apology, as it would have.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from handlers.context import Args, Context
from handlers.reply import Reply

if TYPE_CHECKING:
    from bot.router import Intent

SHARED_COMMANDS = frozenset({
    "settings", "flag", "status", "throughput", "gpus", "logs", "compare", "changes", "audit",
    "chart_throughput", "chart_loads", "chart_bench",
})
"""Commands whose answer is the same for whoever asks (they read the nodes and the store, and act on nothing)."""

ShareKey = tuple[str, tuple[tuple[str, str], ...], tuple[str, ...], bool, Args, str | None, tuple[str, ...], str,
                 bool]


def share_key(intent: Intent, ctx: Context) -> ShareKey | None:
    """What makes a question the same as another one (None: this one is answered for its asker alone)."""
    if not intent.matched or intent.unknown or intent.command.name not in SHARED_COMMANDS:
        return None
    return (intent.command.name, tuple((s.name, s.node) for s in intent.services),
            tuple(n.name for n in intent.nodes), intent.explicit_target, intent.args, intent.note,
            tuple(intent.offers), ctx.asker.surface, ctx.service_data)


class _OwnerGone(Exception):
    """The question answering for everyone was called off: whoever waited asks again."""


class SharedAnswers:
    """The questions being answered now, and who waits for each answer (one per runtime)."""

    def __init__(self) -> None:
        self._flights: dict[ShareKey, list[asyncio.Future[tuple[Reply, str]]]] = {}
        self.runs = 0  # answers made (for the benchmark's report: questions minus runs were shared)

    async def answer(self, key: ShareKey, make: Callable[[], Awaitable[tuple[Reply, str]]]
                     ) -> tuple[Reply, str, bool]:
        """``make()``'s reply and outcome, made once for every asker of ``key`` who arrives while it is made;
        and whether this asker made it (True) or got a copy (False)."""
        while (waiters := self._flights.get(key)) is not None:
            mine: asyncio.Future[tuple[Reply, str]] = asyncio.get_running_loop().create_future()
            waiters.append(mine)
            try:
                reply, outcome = await mine
            except _OwnerGone:
                continue
            return reply, outcome, False
        waiters = self._flights[key] = []
        self.runs += 1
        try:
            reply, outcome = await make()
        except BaseException as e:
            for w in waiters:
                if not w.done():
                    w.set_exception(_OwnerGone() if isinstance(e, asyncio.CancelledError) else e)
            raise
        finally:
            if self._flights.get(key) is waiters:
                del self._flights[key]
        # Each waiter's copy is made now, before the first asker's dispatcher or front end adds to its reply.
        for w in waiters:
            if not w.done():
                w.set_result((_copy(reply), outcome))
        return reply, outcome, True


def _copy(reply: Reply) -> Reply:
    """A reply of one's own: the lists and the top level of ``data`` are the asker's to add to; the sections,
    buttons and data values themselves are shared and never changed once made."""
    return reply.model_copy(update={"sections": list(reply.sections), "actions": list(reply.actions),
                                    "attachments": list(reply.attachments), "data": dict(reply.data)})
