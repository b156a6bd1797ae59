"""What a handler gets: the services it may use (injected, never imported) and the parsed request."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol, overload

from config.models import BotConfig, Node, Service
from handlers.ports import Dashboards, Jobs, Notifier
from services.access import GroupLookup, NoGroups
from services.cluster import Cluster
from services.store.ports import StateStore

ArgValue = str | int | float | bool | None | list[str]
"""What a validated request argument may be (the router fills them; no raw message text)."""


def utcnow() -> datetime:
    """Timezone-aware now (a function so tests can move the clock)."""
    return datetime.now(UTC)


@dataclass(frozen=True)
class Asker:
    """Who is asking and from where; Slack identities are immutable ids, never display names."""

    surface: Literal["slack", "cli", "json"] = "cli"
    user_id: str | None = None
    channel_id: str | None = None
    thread_ts: str | None = None
    usergroups: frozenset[str] = frozenset()


@dataclass
class Request:
    """A parsed question: the intent, the targets it names, and validated arguments (no raw text)."""

    intent: str
    services: list[Service]
    nodes: list[Node]
    explicit_target: bool = False
    args: dict[str, ArgValue] = field(default_factory=dict)


class _Opening(Protocol):
    """A store still opening: a ``concurrent.futures.Future`` of it."""

    def result(self, timeout: float | None = None) -> StateStore: ...


class StoreField:
    """``Context.store``: the state store, given open or still opening (a ``Future`` of it), or None.

    Handlers see it as :class:`~services.store.ports.StateStore` (one narrow protocol per aggregate:
    ``ctx.store.locks``, ``ctx.store.requests``…), never as the concrete ``Store``.

    A one-shot front end (``inferbot ask``) opens the store in a worker thread while the question is routed
    and the nodes are asked: importing SQLAlchemy and opening the database cost ~0.1 s of CPU that the
    network wait hides (docs/architecture.md, "Lazy imports"). A handler reads ``ctx.store`` as always; the
    first read waits for the opening there (usually long finished: handlers use the store after asking the
    nodes) and raises what opening it raised. Waiting blocks the event loop, but never longer than opening
    the store before the question did, and every later read is a plain attribute read.
    """

    def __set_name__(self, owner: type, name: str) -> None:
        self._attr = f"_{name}_value"

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> None: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> StateStore | None: ...
    def __get__(self, obj: object | None, objtype: type | None = None) -> StateStore | None:
        if obj is None:
            return None  # the dataclass's default: no store
        value = obj.__dict__[self._attr]
        if isinstance(value, Future):
            value = obj.__dict__[self._attr] = value.result()
        store: StateStore | None = value  # what __set__ took, opened
        return store

    def __set__(self, obj: object, value: StateStore | _Opening | None) -> None:
        obj.__dict__[self._attr] = value


@dataclass
class Context:
    """The services a handler may use, passed in by the composition root."""

    config: BotConfig
    cluster: Cluster
    asker: Asker = field(default_factory=Asker)
    store: StoreField = StoreField()  # reads as ``StateStore | None``; see StoreField
    now: Callable[[], datetime] = utcnow
    notifier: Notifier | None = None  # None: the front end posts no notices (one question from the terminal)
    jobs: Jobs | None = None  # None outside ``serve``: nothing is scheduled
    groups: GroupLookup = field(default_factory=NoGroups)
    dashboards: Dashboards | None = None  # the open App Home tabs (Slack only)


def require_store(ctx: Context) -> StateStore:
    """The state store of ``ctx``, for code that is only reached with one configured (restarts, follows,
    benchmarks: their commands refuse politely without one first)."""
    store = ctx.store
    if store is None:
        raise RuntimeError("this needs the state store ([state] dir or url)")
    return store
