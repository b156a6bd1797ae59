"""What a handler gets: the services it may use (injected, never imported) and the parsed request."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from config.models import BotConfig, Node, Service
from services.cluster import Cluster

if TYPE_CHECKING:
    from services.store.store import Store


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
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class Context:
    """The services a handler may use, passed in by the composition root."""

    config: BotConfig
    cluster: Cluster
    asker: Asker = field(default_factory=Asker)
    store: Store | None = None
    now: Callable[[], datetime] = utcnow
    extras: dict[str, Any] = field(default_factory=dict)
