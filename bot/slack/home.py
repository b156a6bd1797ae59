"""The App Home tab on Slack: publish the dashboard when it is opened, refreshed, or something changed.

Who has the tab open, when each dashboard was last published and whether it is stale are rows in the
state database (``store.home_views``), not this process's memory: a restarted bot (or a second replica) keeps
refreshing the same dashboards, and the pacing — at most one republish per person every
``MIN_INTERVAL_S`` — is one atomic claim in the database. Opening the tab or pressing **Refresh** always
publishes. Handlers tell us about changes through ``handlers.notify.dashboards_changed`` (the follow job
and the unplanned-restart watcher); this module implements that ``Dashboards`` protocol. The listeners
(the tab opened, its Refresh and Restart buttons) are ``bot.slack.listeners.home``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from slack_sdk.errors import SlackApiError

from bot.slack.blocks import render_failure
from bot.slack.home_view import line_view, view_dict
from bot.slack.poster import SLACK_ERRORS, Poster
from handlers.context import Asker, Context, utcnow
from handlers.home import Dashboard, for_user, read_dashboard

if TYPE_CHECKING:
    from bot.app import Runtime

log = logging.getLogger("inferbot.home")
MIN_INTERVAL_S = 30.0
"""A dashboard is republished at most this often per person (``views.publish`` is rate limited too)."""
OPEN_FOR_S = 12 * 3600.0
"""A Home tab opened this long ago still counts as open (Slack tells us when it is opened, not closed)."""


class HomePublisher:
    """Publishes dashboards; ``changed`` is the ``handlers.notify.Dashboards`` hook."""

    def __init__(self, rt: Runtime, poster: Poster, *, clock: Callable[[], datetime] = utcnow,
                 min_interval_s: float = MIN_INTERVAL_S, open_for_s: float = OPEN_FOR_S) -> None:
        # ``rt`` is what the dashboards are read with: the config, cluster and store, and the group lookup
        # (who may press Restart). Reading a dashboard posts nothing and schedules nothing.
        self.runtime, self.poster, self.clock = rt, poster, clock
        self.min_interval_s, self.open_for_s = min_interval_s, open_for_s
        self._flush: asyncio.Task[None] | None = None
        self._again = False
        self._retry: asyncio.Task[None] | None = None
        self.published = 0

    # -- what people do
    async def opened(self, user: str) -> None:
        """The person opened the Home tab: remember it, and publish now."""
        store = self.runtime.store
        if store is not None:
            try:
                await store.home_views.opened(user, self.clock())
            except Exception:  # the tab is still worth showing; it just won't refresh itself
                log.warning("could not record the open Home tab", exc_info=True)
        await self.publish_now(user)

    async def publish_now(self, user: str) -> None:
        """Read the cluster and publish ``user``'s dashboard, unpaced (they asked for it)."""
        dash = await read_dashboard(self._ctx())
        store = self.runtime.store
        if store is not None:
            try:
                await store.home_views.claim_publish(user, self.clock(), self.min_interval_s, force=True)
            except Exception:  # pacing is only bookkeeping here: the person asked, so they get the view
                log.warning("could not record the Home publish", exc_info=True)
        await self._publish(user, dash)

    # -- handlers.notify.Dashboards
    async def changed(self, what: str) -> None:
        """Something a dashboard shows changed: mark the open ones stale and republish, paced, soon."""
        store = self.runtime.store
        if store is None:
            return
        if not await store.home_views.mark_dirty(self.clock() - timedelta(seconds=self.open_for_s)):
            return  # nobody has the Home tab open
        log.debug("dashboards stale after a change of %s", what)
        self._kick()

    def _kick(self) -> None:
        if self._flush is not None and not self._flush.done():
            self._again = True  # one more round after the one running: no change is lost
            return
        self._flush = asyncio.get_running_loop().create_task(self._flush_loop())

    async def _flush_loop(self) -> None:
        while True:
            self._again = False
            try:
                await self.flush()
            except Exception:
                log.warning("republishing the dashboards failed", exc_info=True)
            if not self._again:
                return

    async def flush(self) -> int:
        """Republish every stale open dashboard whose pacing allows it now; returns how many were published."""
        store = self.runtime.store
        if store is None:
            return 0
        now = self.clock()
        since = now - timedelta(seconds=self.open_for_s)
        due = await store.home_views.due(now, self.min_interval_s, since)
        dash: Dashboard | None = None
        sent = 0
        for user in due:
            if not await store.home_views.claim_publish(user, self.clock(), self.min_interval_s):
                continue  # another replica (or an open/refresh) just published it
            if dash is None:
                dash = await read_dashboard(self._ctx())  # one read of the cluster for everybody
            if await self._publish(user, dash):
                sent += 1
        if await store.home_views.due(self.clock(), 0.0, since):
            self._retry_later()  # some were held back by pacing (or failed): their turn comes
        return sent

    def _retry_later(self) -> None:
        """Stale dashboards that pacing held back get their turn when the interval is over."""
        if self._retry is not None and not self._retry.done():
            return

        async def later() -> None:
            await asyncio.sleep(self.min_interval_s)
            self._kick()

        self._retry = asyncio.get_running_loop().create_task(later())

    async def idle(self) -> None:
        """Wait for the republishing in flight (tests, shutdown)."""
        while self._flush is not None and not self._flush.done():
            await asyncio.wait({self._flush})

    def close(self) -> None:
        """Stop the delayed retry and any republishing in flight."""
        for t in (self._retry, self._flush):
            if t is not None and not t.done():
                t.cancel()

    # -- plumbing
    def _ctx(self) -> Context:
        ctx = self.runtime.context(Asker(surface="slack"))
        ctx.now = self.clock
        return ctx

    async def _publish(self, user: str, dash: Dashboard) -> bool:
        mine = await for_user(self._ctx(), dash, user)
        try:
            view = view_dict(mine)
        except Exception as e:  # the tab still says something: what went wrong, and where to look
            log.exception("rendering the Home tab failed", extra={"event": "slack-home", "user": user})
            view = line_view(f"The dashboard could not be drawn ({render_failure(e)}; logged) — "
                                "ask me `status` instead.")
        try:
            await self.poster.publish(user, view)
        except SLACK_ERRORS as e:
            reason = e.response.get("error") if isinstance(e, SlackApiError) else type(e).__name__
            log.warning("views.publish failed", extra={"event": "slack-home", "user": user, "reason": reason})
            if self.runtime.store is not None:
                await self.runtime.store.home_views.publish_failed(user)
            return False
        self.published += 1
        log.info("home published", extra={"event": "slack-home", "user": user, "services": len(dash.services)})
        return True
