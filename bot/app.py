"""The composition root: the only place that builds clients from config and environment."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import resource
import sys
import threading
from collections.abc import AsyncIterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bot.shared_answers import SharedAnswers
from config.models import BotConfig
from handlers.context import Asker, Context
from handlers.ports import Dashboards, Jobs, Notifier
from services.access import GroupLookup, NoGroups
from services.cluster import Cluster
from services.node.ssh import NodePool

if TYPE_CHECKING:
    from services.store.store import Store

log = logging.getLogger("inferbot.app")

FD_HEADROOM = 256
"""Open files the bot needs besides one socket per node: the store, Slack's sockets, logs, the event loop."""


@dataclass(frozen=True)
class Runtime:
    """Everything long-lived that handlers may be given: built once, whole, and never changed.

    :func:`runtime` opens the core (config, node pool, cluster, store); a front end that gives handlers
    ports (how to post notices, schedule follow-ups, look up user groups, refresh dashboards) builds its
    runtime whole on that core with :meth:`with_ports` (the terminal, the tests) or as a subclass of its
    own (``bot.slack.runtime.SlackRuntime``). Nothing fills a port in afterwards.
    """

    config: BotConfig
    pool: NodePool
    cluster: Cluster
    store: Store | None = None
    notifier: Notifier | None = None
    jobs: Jobs | None = None
    groups: GroupLookup | None = None
    dashboards: Dashboards | None = None  # the open App Home tabs (Slack only)
    # The store while it is still being opened (``runtime(..., store_soon=True)``; ``store`` is None then):
    # handed to each context as it is, so a handler waits for it only when it reads ``ctx.store``.
    opening: Future[Store] | None = None
    # The questions being answered now, for a front end that lets the same question asked at once share one
    # answer (``bot.dispatch.answer``'s ``shared``).
    shared: SharedAnswers = field(default_factory=SharedAnswers)

    def context(self, asker: Asker | None = None, service_data: bool = True) -> Context:
        """A fresh handler context for one request (``service_data``: see ``Context``)."""
        store = self.store if self.store is not None else self.opening
        return Context(config=self.config, cluster=self.cluster, asker=asker or Asker(), store=store,
                       notifier=self.notifier, jobs=self.jobs, groups=self.groups or NoGroups(),
                       dashboards=self.dashboards, service_data=service_data)

    def with_ports(self, *, notifier: Notifier | None = None, jobs: Jobs | None = None,
                   groups: GroupLookup | None = None, dashboards: Dashboards | None = None) -> Runtime:
        """A runtime on this one's core (config, pool, cluster, store) with exactly these ports."""
        return Runtime(config=self.config, pool=self.pool, cluster=self.cluster, store=self.store,
                       opening=self.opening, notifier=notifier, jobs=jobs, groups=groups, dashboards=dashboards)


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


OPENING_SWITCH_INTERVAL_S = 0.0005
"""How long the loop's thread waits at most for the GIL while the store opens in the background."""


def open_store_soon(config: BotConfig) -> Future[Store]:
    """:func:`open_store` in a worker thread, and the schema version read there too: the future store.

    For a one-shot command, whose main thread meanwhile routes the question and waits for the nodes
    (importing SQLAlchemy and building the engine is CPU work that this wait mostly hides). Only a SQLite store
    is given (:func:`runtime` opens any other at once, so that a bad ``[state] url`` or password still stops
    the command before a node is asked). The schema is only read here, never changed: an older, newer or
    missing one is left to the store's first use, as when the store is opened at once.
    """
    opened: Future[Store] = Future()

    def work() -> None:
        # This thread holds the GIL through long imports; the event loop's thread, woken by the network, waits
        # for it up to the switch interval (5 ms by default) each time: a shorter one while this runs.
        interval = sys.getswitchinterval()
        sys.setswitchinterval(OPENING_SWITCH_INTERVAL_S)
        # SQLAlchemy's modules live until the process ends: collections during their import free nothing,
        # and what they built is frozen afterwards (as bot.cli does with the command's own imports).
        collecting = gc.isenabled()
        gc.disable()
        try:
            store = open_store(config)
        except BaseException as e:  # handed to whoever reads the store (raised there, as open_store would)
            opened.set_exception(e)
            return
        finally:
            gc.freeze()
            if collecting:
                gc.enable()
            sys.setswitchinterval(interval)
        try:
            store.check_schema()
        finally:
            opened.set_result(store)

    threading.Thread(target=work, name="inferbot-store-open", daemon=True).start()
    return opened


# Young-generation collections every 10,000 new container objects instead of 700: an answer about hundreds of
# nodes allocates millions of small objects that reference counting frees on its own, and at the default the
# collector runs hundreds of times per question, each time walking objects that are about to be freed anyway.
GC_THRESHOLDS = (10_000, 10, 10)


def settle_gc() -> None:
    """Once per process, when the long-lived objects exist: keep the collector off them, and run it less often.

    ``gc.freeze`` moves every object alive now (modules, classes, pydantic's validators, the config) to a
    permanent generation that collections never walk again; a full collection then only looks at what the
    bot made since. Objects are still freed by reference counting as before. (The thresholds tell that it
    ran: ``inferbot`` freezes its imports already, so a freeze count does not.)
    """
    if gc.get_threshold() == GC_THRESHOLDS:
        return
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def raise_open_files(nodes: int) -> int:
    """Raise this process's soft limit of open files (``RLIMIT_NOFILE``) so that one connection per node fits,
    up to the hard limit; returns the soft limit in force afterwards.

    systemd and most shells start a process with a soft limit of 1,024 and a far higher hard one, and the
    pool keeps one socket per node: without this, a bot asking ~800 nodes or more at once fails with
    "Too many open files" on the last ones. A hard limit too low for the nodes is said once, in the log.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = nodes + FD_HEADROOM
    if soft == resource.RLIM_INFINITY or soft >= want:
        return soft
    new = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if new > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    if new < want:
        log.warning("%d nodes need about %d open files, but this process may open at most %d: raise the hard "
                    "limit (LimitNOFILE= in the bot's systemd unit, `ulimit -Hn`, or the container's nofile)",
                    nodes, want, new)
    return new


@contextlib.asynccontextmanager
async def runtime(config: BotConfig, with_store: bool = True, store_soon: bool = False) -> AsyncIterator[Runtime]:
    """Build the runtime for ``config`` and close it afterwards.

    ``store_soon``: open a SQLite store in a worker thread (:func:`open_store_soon`) while the caller goes
    on; contexts get it as it is, and it is waited for (and its error raised, if opening failed) on the
    way out at the latest. For one-shot commands; a long-lived front end opens its store at once.
    """
    settle_gc()
    raise_open_files(len(config.nodes))
    pool = NodePool()
    soon = with_store and store_soon and config.state.database_url().startswith("sqlite:")
    # In a worker thread: a PostgreSQL store reads INFERBOT_DB_PASSWORD_FILE, file I/O kept off the event loop.
    store = await asyncio.to_thread(open_store, config) if with_store and not soon else None
    opening = open_store_soon(config) if soon else None
    rt = Runtime(config=config, pool=pool, cluster=Cluster(config, pool), store=store, opening=opening)
    try:
        yield rt
    finally:
        await pool.close()
        if opening is not None:
            store = await asyncio.wrap_future(opening)
        if store is not None:
            await store.close()
