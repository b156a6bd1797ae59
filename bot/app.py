"""The composition root: the only place that builds clients from config and environment."""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from config.models import BotConfig
from handlers.context import Asker, Context
from handlers.ports import Dashboards, Jobs, Notifier
from services.access import GroupLookup, NoGroups
from services.cluster import Cluster
from services.node.ssh import NodePool

if TYPE_CHECKING:
    from services.store.store import Store


@dataclass
class Runtime:
    """Everything long-lived that handlers may be given."""

    config: BotConfig
    pool: NodePool
    cluster: Cluster
    store: Store | None = None
    # How handlers post notices, schedule follow-ups and look up Slack user groups; set by the front end.
    notifier: Notifier | None = None
    jobs: Jobs | None = None
    groups: GroupLookup | None = None
    dashboards: Dashboards | None = None  # the open App Home tabs (Slack only)

    def context(self, asker: Asker | None = None) -> Context:
        """A fresh handler context for one request."""
        return Context(config=self.config, cluster=self.cluster, asker=asker or Asker(), store=self.store,
                       notifier=self.notifier, jobs=self.jobs, groups=self.groups or NoGroups(),
                       dashboards=self.dashboards)


def open_store(config: BotConfig) -> Store:
    """The state store (SQLite in the state directory unless ``[state] url`` names another database).

    A PostgreSQL password comes from ``$INFERBOT_DB_PASSWORD`` / ``$INFERBOT_DB_PASSWORD_FILE`` only
    (``services.store.db_url.DatabaseUrlError``: one line, e.g. for a password written into the config).
    """
    # SQLAlchemy is imported here, when a store is opened, not with this module (docs/architecture.md).
    from services.store.db_url import database_url
    from services.store.store import Store

    url = config.state.database_url()
    if url.startswith("sqlite:///"):
        os.makedirs(os.path.dirname(url.removeprefix("sqlite:///")) or ".", exist_ok=True)
        return Store(url)
    return Store(database_url(url, os.environ))


# Young-generation collections every 10,000 new container objects instead of 700: an answer for 512 nodes
# allocates millions of small objects that reference counting frees on its own, and at the default the
# collector ran hundreds of times per question (a fifth of the bot's CPU per node).
GC_THRESHOLDS = (10_000, 10, 10)


def settle_gc() -> None:
    """Once per process, when the long-lived objects exist: keep the collector off them, and run it less often.

    ``gc.freeze`` moves every object alive now (modules, classes, pydantic's validators, the config) to a
    permanent generation that collections never walk again; a full collection then only looks at what the
    bot made since. Objects are still freed by reference counting as before.
    """
    if gc.get_freeze_count():
        return
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


@contextlib.asynccontextmanager
async def runtime(config: BotConfig, with_store: bool = True) -> AsyncIterator[Runtime]:
    """Build the runtime for ``config`` and close it afterwards."""
    settle_gc()
    pool = NodePool()
    store = open_store(config) if with_store else None
    rt = Runtime(config=config, pool=pool, cluster=Cluster(config, pool), store=store)
    try:
        yield rt
    finally:
        await pool.close()
        if store is not None:
            await store.close()
