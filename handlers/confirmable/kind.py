"""What a kind of confirmable request is: the small object the one flow (``flow.py``) runs.

A kind says what a request of it checks and shows before anyone confirms (:meth:`Kind.prepare`), what it
takes and checks again once confirmed (:meth:`Kind.claim`), what it does then, exactly once
(:meth:`Kind.run`), and how a request a stopped process left confirmed or running ends
(:meth:`Kind.settle`). Everything else is the flow's, the same for every kind: the request row and its
state machine, the buttons, who may click, the two-person rule, expiry, the audit events
``<kind>.requested`` / ``.confirmed`` / ``.cancelled`` / ``.expired`` / ``.click_refused`` / ``.refused``
/ ``.interrupted``, and the rewrites of the confirmation message. A kind is registered once, in
``handlers/request_kinds.py``, under the name stored in the request row's ``kind``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from config.models import Service
from handlers.audit import record
from handlers.context import Context, Request, require_store
from handlers.notice_words import hhmm
from handlers.notify import Notifier
from handlers.reply import Reply, Section, Status
from services import mentions
from services.store.ports import StateStore
from services.store.records import ConfirmableRequest

CONFIRM = "restart_confirm"
CANCEL = "restart_cancel"
"""The two buttons of every kind's confirmation (their action ids are a contract: ``slack-manifest.yaml``);
the button's value is the request id, and the request's kind says what it confirms."""
_BY_MENTION = re.compile(" by " + mentions.PATTERN)


@dataclass(frozen=True)
class Words:
    """What the flow calls a kind when it speaks for it (every sentence's shape is the flow's)."""

    title: str
    """``Restart``: the header (``Restart kimi on gpu-a?``), the button, ``Restart confirmed by …``."""
    verb: str
    """``restart``: ``asked to restart``, ``name exactly one service to restart``, ``this restart request``."""
    command: str
    """``restart``: the chat command, in the examples of a refusal."""
    confirmers: str = "people allowed to restart it"
    """``Only <confirmers> may confirm``."""
    elsewhere: str = "refused: `{command}` is asked in Slack, where it is confirmed with a button"
    """The refusal of a request asked outside Slack (``{service}`` and ``{command}`` are filled in)."""
    forced: str = "forced past the cooldown"
    """What a request asked with ``force`` skipped (``confirmed (forced past the cooldown)``)."""
    names_who_ended: bool = True
    """A click on a used request is told who confirmed it, when, or who cancelled it (False: only its state)."""


@dataclass(frozen=True)
class Asked:
    """A request of a kind, once the flow has checked the service it names, who asks and where."""

    service: Service
    request: Request  # the parsed question: the kind reads its own arguments from it
    force: bool = False


@dataclass
class Preview:
    """What a kind shows before anyone confirms (the flow adds who may confirm, the expiry and the buttons)."""

    sections: list[Section]
    data: dict[str, object] = field(default_factory=dict)  # beside request_id, service, node, expires_at…
    detail: str = ""  # the ``<kind>.requested`` audit line
    request_id: str | None = None
    """The request's id when the kind chose it (it keeps data of its own under that id); None: the flow's."""


@dataclass
class Refusal:
    """A refusal with more to show than its line (a settings change's preflight, step by step). As with a plain
    ``refused: …`` string, nothing was written and nobody is asked."""

    text: str
    sections: list[Section] = field(default_factory=list)
    data: dict[str, object] = field(default_factory=dict)


@dataclass
class ActionOutcome:
    """What a click leads to: a new text for the confirmation message, and/or a word to the clicker."""

    message: Reply | None = None  # rewrite the confirmation message with this (None: leave it as it is)
    ephemeral: str | None = None  # tell only the person who clicked
    executed: bool = False  # this click ran the request


@dataclass(frozen=True)
class Later:
    """Settling: the run may still be going; look again at ``at``."""

    at: datetime


@dataclass(frozen=True)
class Ended:
    """Settling: the run is over (``ok``: done, else failed); the request has not heard it yet."""

    ok: bool


@dataclass(frozen=True)
class Interrupted:
    """Settling: nothing shows the run going; once ``grace_s`` have passed since the request last moved, it
    cannot be going any more and fails (audited ``<kind>.interrupted`` with ``why``)."""

    grace_s: float
    why: str


Settling = Later | Ended | Interrupted | None
"""What :meth:`Kind.settle` found (None: nothing left to do for the flow)."""


class Kind(Protocol):
    """A kind of confirmable request. ``name`` is stored in the request row and prefixes its audit events;
    ``prefix`` starts the ids of its requests (``r-``, ``b-``: ids in flight in users' databases keep theirs)."""

    name: str
    prefix: str
    words: Words

    async def prepare(self, ctx: Context, asked: Asked) -> Preview | str | Refusal:
        """The checks before anyone is asked to confirm, and the preview: a refusal (``refused: …``, or a
        :class:`Refusal` with sections) or what the confirmation shows. A refusal writes nothing and asks nobody."""
        ...

    async def claim(self, run: Confirmed) -> str | None:
        """Once confirmed, before it runs: take what the run holds (a lock) and check again what may have
        changed while the request waited. A refusal (having let go of what it took) fails the request."""
        ...

    async def run(self, run: Confirmed) -> ActionOutcome:
        """Run the request, which is ``running`` now and claimed: once, by this caller only."""
        ...

    async def release(self, ctx: Context, req: ConfirmableRequest) -> None:
        """Let go of what :meth:`claim` took (idempotent): after a lost race, or when the flow settles it."""
        ...

    async def settle(self, ctx: Context, req: ConfirmableRequest, notifier: Notifier | None) -> Settling:
        """A request left ``confirmed`` or ``running`` (its process may have stopped): where its run is."""
        ...


@dataclass(frozen=True)
class Confirmed:
    """A request that won its confirmation, as its kind's :meth:`~Kind.claim` and :meth:`~Kind.run` see it."""

    ctx: Context
    kind: Kind
    req: ConfirmableRequest
    service: Service
    who: str | None  # who confirmed
    at: datetime  # when

    @property
    def store(self) -> StateStore:
        """The state store (a request lives there)."""
        return require_store(self.ctx)

    @property
    def line(self) -> str:
        """``Restart confirmed by <@U…> at 14:02``: how the rewritten confirmation starts."""
        return f"{self.kind.words.title} confirmed by {mentions.user(self.who)} at {hhmm(self.at)}"

    def message(self, text: str, status: Status, extra: list[Section] | None = None) -> Reply:
        """The confirmation message rewritten to say ``text``."""
        return message(self.kind, self.req, text, status, extra)

    async def audit(self, event: str, detail: str) -> None:
        """Audit ``<kind>.<event>`` for this request."""
        await record(self.ctx, f"{self.kind.name}.{event}", self.service.name, self.service.node, detail,
                     request_id=self.req.id)

    async def finish(self, ok: bool) -> bool:
        """The run is over: ``running`` → ``done``, or → ``failed``; True for the one caller that moved it."""
        return await finish(self.store, self.req.id, ok, self.who, self.ctx.now())


async def finish(store: StateStore, request_id: str, ok: bool, actor: str | None, at: datetime) -> bool:
    """Move a request that ran to ``done`` (from ``running``) or ``failed`` (from ``confirmed`` or ``running``)."""
    if ok:
        return await store.requests.transition(request_id, {"running"}, "done", actor, at)
    return await store.requests.transition(request_id, {"confirmed", "running"}, "failed", actor, at)


def message(kind: Kind, req: ConfirmableRequest, text: str, status: Status,
            extra: list[Section] | None = None) -> Reply:
    """The confirmation message rewritten (no buttons) to say what happened."""
    # Headers are plain text in Slack (no mentions): the title drops "by <@U…>", the sentence keeps it.
    title = _BY_MENTION.sub("", text)
    sections = [Section(kind="text", text=text),
                Section(kind="context", text=f"{kind.words.title} of {req.service} on {req.node} ({req.unit}), "
                                             f"asked by {mentions.user(req.requested_by)} — request {req.id}")]
    return Reply(intent=kind.name, title=title, status=status, sections=sections + (extra or []),
                 data={"notice": text, "request_id": req.id, "service": req.service, "node": req.node,
                       "state": status})
