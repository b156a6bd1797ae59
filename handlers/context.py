"""What a handler gets: the services it may use (injected, never imported) and the parsed request."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Literal

from config.models import BotConfig, Node, Service
from handlers.ports import Dashboards, Jobs, Notifier
from services.access import GroupLookup, NoGroups
from services.cluster import Cluster

if TYPE_CHECKING:
    from services.store.store import Store


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


@dataclass
class Context:
    """The services a handler may use, passed in by the composition root."""

    config: BotConfig
    cluster: Cluster
    asker: Asker = field(default_factory=Asker)
    store: Store | None = None
    now: Callable[[], datetime] = utcnow
    notifier: Notifier | None = None  # None: the front end posts no notices (one question from the terminal)
    jobs: Jobs | None = None  # None outside ``serve``: nothing is scheduled
    groups: GroupLookup = field(default_factory=NoGroups)
    dashboards: Dashboards | None = None  # the open App Home tabs (Slack only)
