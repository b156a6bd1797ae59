"""The kinds of confirmable request, by the name stored in a request's row, and the flow's ways in by id.

A button press, an expiry job and a settle job know only a request id: :func:`on_action`,
:func:`expire_request` and :func:`settle_request` read the request, look its kind up in :data:`KINDS` and
hand both to the one flow (``handlers/confirmable/flow.py``). A new kind is one object
(``handlers/confirmable/kind.py``) added to :data:`KINDS` (and its name to the store's
``records.REQUEST_KINDS``); nothing else here or in the flow changes.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from handlers import bench_run, restart
from handlers.change import kind as change
from handlers.confirmable import flow
from handlers.confirmable.kind import (
    ActionOutcome,
    Asked,
    Confirmed,
    Interrupted,
    Kind,
    Preview,
    Refusal,
    Settling,
    Words,
)
from handlers.context import Context, require_store
from handlers.notify import Notifier
from services.store.records import ConfirmableRequest

RESERVED = frozenset({"follow", "watch", "expire", "reconcile"})
"""Names no kind may take: a settle job's id is ``<kind>:<request id>``, beside these jobs' ids."""


class Kinds:
    """The registered kinds, by name (and by id prefix, to name the kind of an id nobody stored)."""

    def __init__(self, *kinds: Kind) -> None:
        self._by_name: dict[str, Kind] = {}
        for kind in kinds:
            self.register(kind)

    def register(self, kind: Kind) -> None:
        """Add ``kind``; its name and its id prefix must be its own."""
        if kind.name in RESERVED:
            raise ValueError(f"{kind.name!r} names jobs of the scheduler: a kind of request can't be called so")
        if kind.name in self._by_name:
            raise ValueError(f"a kind of request called {kind.name!r} exists already")
        if not kind.prefix or any(kind.prefix == k.prefix for k in self._by_name.values()):
            raise ValueError(f"the request id prefix {kind.prefix!r} is taken")
        self._by_name[kind.name] = kind

    def unregister(self, name: str) -> None:
        """Remove the kind called ``name`` (tests that registered their own)."""
        self._by_name.pop(name, None)

    def names(self) -> tuple[str, ...]:
        """The registered kinds' names."""
        return tuple(self._by_name)

    def named(self, name: str) -> Kind:
        """The kind called ``name``; a kind this bot does not know (a newer bot stored it) as :class:`Unknown`."""
        return self._by_name.get(name) or Unknown(name)

    def of_id(self, request_id: str) -> Kind | None:
        """The kind whose requests' ids start like ``request_id`` (only to name it: the row's kind decides)."""
        return next((k for k in self._by_name.values() if request_id.startswith(k.prefix)), None)


class Unknown:
    """A kind this bot does not know (a request stored by a newer inferbot): it can be cancelled or expire,
    never run; left confirmed or running, it fails at once."""

    prefix = ""

    def __init__(self, name: str) -> None:
        self.name = name
        self.words = Words(title=name.capitalize(), verb=name, command=name)
        self._refusal = f"refused: this inferbot does not know requests of kind {name!r}"

    async def prepare(self, ctx: Context, asked: Asked) -> Preview | str | Refusal:
        """Never asked (no command makes one)."""
        return self._refusal

    async def claim(self, run: Confirmed) -> str | None:
        """Refused: nothing here knows how to run it."""
        return self._refusal

    async def run(self, run: Confirmed) -> ActionOutcome:  # pragma: no cover - claim refuses first
        """Never reached."""
        return ActionOutcome(ephemeral=self._refusal)

    async def release(self, ctx: Context, req: ConfirmableRequest) -> None:
        """Nothing was taken."""

    async def settle(self, ctx: Context, req: ConfirmableRequest, notifier: Notifier | None) -> Settling:
        """It cannot be running here: it fails."""
        return Interrupted(0.0, self._refusal.removeprefix("refused: "))


KINDS = Kinds(restart.RESTART, bench_run.BENCH, change.CHANGE)
"""Every kind of confirmable request, by the name in its row (``services/store/records.REQUEST_KINDS``)."""


class Again(NamedTuple):
    """When to settle a request again (its kind names the job: ``<kind>:<request id>``)."""

    kind: str
    at: datetime


async def on_action(ctx: Context, action_id: str, request_id: str) -> ActionOutcome:
    """A click on ``restart_confirm`` / ``restart_cancel``; the button's value is the request id."""
    req = await require_store(ctx).requests.get(request_id)
    if req is None:
        named = KINDS.of_id(request_id)
        return ActionOutcome(ephemeral=f"refused: I don't know this {named.words.verb + ' ' if named else ''}request")
    return await flow.click(ctx, KINDS.named(req.kind), req, action_id)


async def expire_request(ctx: Context, request_id: str, notifier: Notifier | None) -> bool:
    """At its expiry: a still-pending request becomes expired and its message says so (True when it did)."""
    req = await require_store(ctx).requests.get(request_id)
    if req is None:
        return False
    return await flow.expire(ctx, KINDS.named(req.kind), req, notifier)


async def settle_request(ctx: Context, request_id: str, notifier: Notifier | None) -> Again | None:
    """A request a stopped process may have left confirmed or running: finish it once, or say when to look again."""
    req = await require_store(ctx).requests.get(request_id)
    if req is None:
        return None
    at = await flow.settle(ctx, KINDS.named(req.kind), req, notifier)
    return Again(req.kind, at) if at is not None else None
