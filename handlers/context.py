"""What a handler gets: the services it may use (injected, never imported) and the parsed request."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Literal, Protocol, overload

from pydantic import BaseModel, ConfigDict, Field

from config.models import BotConfig, Node, Service
from handlers.ports import Dashboards, Jobs, Notifier
from services.access import GroupLookup, NoGroups
from services.cluster import Cluster
from services.store.ports import StateStore

Focus = Literal["flag", "env", "nccl", "model", "flags"]


class Args(BaseModel):
    """A request's typed arguments: what the message says, read by the command that needs it (no raw text).

    Each command declares which of these it reads (``Command.args`` in ``handlers.commands``); the router
    fills only those, and leaves the rest at their defaults.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    lines: int | None = Field(default=None, ge=0)  # logs: how many lines
    window_s: int | None = Field(default=None, gt=0)  # charts: the time window
    force: bool = False  # restart: ask for it although a load is in progress
    focus: Focus | None = None  # settings: one part of the card
    flag: str | None = None  # the canonical vLLM flag asked about (without ``--``)
    env: str | None = None  # the environment variable asked about ("NCCL_PROTO")
    value: str | None = None  # "are we still on NCCL_PROTO=LL?", "tp is 8 right?": the value to check
    duration_s: float | None = Field(default=None, gt=0)  # silence: for how long
    reason: str = ""  # silence: why (cleaned: one line, redacted, no markup)
    negated: bool = False  # restarts: "don't restart kimi"
    change_verb: Literal["set", "unset", "change"] | None = None  # a settings change: how it was asked
    change_text: str | None = None  # its words after the verb, the service left out (shell-style quotes; no shell)


class Understood(BaseModel):
    """What the bot read in a message, as it says it back (``data.understood``) and as help uses it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    intent: str  # the command chosen ("unclear" when none was placed)
    services: list[str] = Field(default_factory=list)  # the service names the message named
    nodes: list[str] = Field(default_factory=list)
    score: float = 0.0  # how sure: the chosen reading's score (0 = nothing placed)
    asked: bool = False  # the answer asks back instead of acting ("did you mean …?")
    suggestions: list[str] = Field(default_factory=list)  # full commands offered ("status kimi")
    note: str | None = None  # one line said before the answer (a second question offered, a doubt)
    helped_by: str | None = None  # the service whose model placed it ([understanding] model; the rules could not)


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
    args: Args = field(default_factory=Args)
    understood: Understood | None = None  # what the router read (None: not from a message, e.g. a button)


class _Opening(Protocol):
    """A store still opening: a ``concurrent.futures.Future`` of it."""

    def result(self, timeout: float | None = None) -> StateStore: ...


class StoreField:
    """``Context.store``: the state store, given open or still opening (a ``Future`` of it), or None.

    Handlers see it as :class:`~services.store.ports.StateStore` (one narrow protocol per aggregate:
    ``ctx.store.locks``, ``ctx.store.requests``…), never as the concrete ``Store``.

    A one-shot front end (``inferbot ask``) opens the store in a worker thread while the question is routed
    and the nodes are asked: importing SQLAlchemy and opening the database is CPU work that the network
    wait hides (docs/architecture.md, "Lazy imports"). A handler reads ``ctx.store`` as always; the
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
    # False: the front end shows the reply's sections and never its data (Slack), so an answer leaves out what
    # only ``data`` would carry (each service's JSON object: as large again as the cards at fleet scale).
    service_data: bool = True


def require_store(ctx: Context) -> StateStore:
    """The state store of ``ctx``, for code that is only reached with one configured (restarts, follows,
    benchmarks: their commands refuse politely without one first)."""
    store = ctx.store
    if store is None:
        raise RuntimeError("this needs the state store ([state] dir or url)")
    return store
