"""The App Home tab on Slack: publish the dashboard when it is opened, refreshed, or something changed.

Who has the tab open, when each dashboard was last published and whether it is stale are rows in the
state database (``store.home_views``), not this process's memory: a restarted bot (or a second replica) keeps
refreshing the same dashboards, and the pacing — at most one republish per person every
``MIN_INTERVAL_S`` — is one atomic claim in the database. Opening the tab or pressing **Refresh** always
publishes. Handlers tell us about changes through ``handlers.notify.dashboards_changed`` (the follow job
and the unplanned-restart watcher); this module implements that ``Dashboards`` protocol.

A **Restart** click runs nothing: it makes the same request ``restart kimi`` makes and posts the usual
confirmation in a DM with the person (or the first of ``restart_channels`` when the policy names some).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from slack_bolt.app.async_app import AsyncApp
from slack_bolt.context.ack.async_ack import AsyncAck
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.blocks import render_failure
from bot.slack.home_view import REFRESH, RESTART, line_view, view_dict
from bot.slack.notifier import SlackNotifier
from bot.slack.restart_actions import ensure_slack_services, is_confirmation, post_confirmation
from handlers.context import Asker, Context, utcnow
from handlers.home import (
    Dashboard,
    for_user,
    parse_key,
    read_dashboard,
    restart_asker,
    restart_channel,
    restart_from_home,
)
from handlers.reply import Reply, Section

if TYPE_CHECKING:
    from bot.app import Runtime


class _Verdict(Protocol):
    @property
    def allowed(self) -> bool: ...


class _Limiter(Protocol):
    def check(self, user: str) -> _Verdict: ...


class _Registered(Protocol):
    @property
    def events(self) -> set[str]: ...

    @property
    def actions(self) -> set[str]: ...


class SlackHost(Protocol):
    """What the Home listeners need from the Slack bot that registers them (kept as a protocol so this module
    does not import bot.slack.app, which imports it)."""

    @property
    def runtime(self) -> Runtime: ...

    @property
    def limiter(self) -> _Limiter: ...

    async def check_rate(self, user: str) -> _Verdict: ...

    async def first_delivery(self, event_id: str) -> bool | None:
        """False for an event already claimed (a Slack retry); made after the ack."""

    @property
    def registered(self) -> _Registered: ...

    def spawn(self, coro: Coroutine[Any, Any, None], what: str) -> None:
        """Run ``coro`` after the ack; failures are logged, never raised into Bolt."""

log = logging.getLogger("inferbot.home")
MIN_INTERVAL_S = 30.0
"""A dashboard is republished at most this often per person (``views.publish`` is rate limited too)."""
OPEN_FOR_S = 12 * 3600.0
"""A Home tab opened this long ago still counts as open (Slack tells us when it is opened, not closed)."""
_SLACK_ERRORS = (SlackApiError, SlackClientError, OSError, TimeoutError)


class HomePublisher:
    """Publishes dashboards; ``changed`` is the ``handlers.notify.Dashboards`` hook."""

    def __init__(self, rt: Runtime, client: AsyncWebClient, *, clock: Callable[[], datetime] = utcnow,
                 min_interval_s: float = MIN_INTERVAL_S, open_for_s: float = OPEN_FOR_S) -> None:
        self.runtime, self.client, self.clock = rt, client, clock
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
            await self.client.views_publish(user_id=user, view=view)
        except _SLACK_ERRORS as e:
            reason = e.response.get("error") if isinstance(e, SlackApiError) else type(e).__name__
            log.warning("views.publish failed", extra={"event": "slack-home", "user": user, "reason": reason})
            if self.runtime.store is not None:
                await self.runtime.store.home_views.publish_failed(user)
            return False
        self.published += 1
        log.info("home published", extra={"event": "slack-home", "user": user, "services": len(dash.services)})
        return True


# --------------------------------------------------------------------------------------------------------
# The Restart button


async def _dm_channel(client: AsyncWebClient, user: str) -> str | None:
    try:
        resp = await client.conversations_open(users=user)
    except _SLACK_ERRORS as e:
        log.warning("conversations.open failed: %s", type(e).__name__)
        return None
    channel = resp.get("channel") or {}
    return str(channel.get("id")) if isinstance(channel, dict) and channel.get("id") else None


def _friendly(reply: Reply) -> Reply:
    """A refusal as a DM: what was refused, why, and how it could be allowed."""
    head = Section(kind="context", text="You pressed Restart on the inferbot Home tab.")
    return reply.model_copy(update={"sections": [head, *reply.sections]})


async def restart_clicked(rt: Runtime, client: AsyncWebClient, user: str, value: str) -> None:
    """A Home **Restart** click (acknowledged): the ``restart kimi`` request, confirmation in a DM or channel."""
    ensure_slack_services(rt, client)
    base = rt.context(Asker(surface="slack", user_id=user))
    service = parse_key(base, value)
    target = restart_channel(base, service) if service is not None else None
    dm = await _dm_channel(client, user)
    channel = target or dm
    if service is None or channel is None:
        where = dm or user
        text = ("refused: I could not open a DM with you to confirm the restart" if service is not None
                else f"refused: {value or 'that service'} is no longer in the config — open the Home tab again")
        await _tell(client, where, Reply(intent="restart", ok=False, title="Restart refused", status="error",
                                         sections=[Section(kind="text", text=text)], error=text))
        return
    ctx = rt.context(restart_asker(base, service, user, dm))
    reply = await restart_from_home(ctx, value)
    if is_confirmation(reply):
        if await post_confirmation(rt, client, channel, None, reply):
            return
        reply = Reply(intent="restart", ok=False, title="Restart not asked", status="error",
                      sections=[Section(kind="text", text="Slack refused the confirmation message; try again.")])
    await _tell(client, dm or user, _friendly(reply))


async def _tell(client: AsyncWebClient, channel: str, reply: Reply) -> None:
    try:
        await SlackNotifier(client).post(channel, None, reply)
    except _SLACK_ERRORS as e:
        log.warning("could not answer the Home click: %s", type(e).__name__)


# --------------------------------------------------------------------------------------------------------
# Listeners


def register(app: AsyncApp, bot: SlackHost) -> HomePublisher:
    """Listen to ``app_home_opened`` and the Home buttons; make the runtime's dashboards this publisher."""
    rt = bot.runtime
    publisher = rt.dashboards if isinstance(rt.dashboards, HomePublisher) else HomePublisher(rt, app.client)
    rt.dashboards = publisher

    def spawn(coro: Coroutine[Any, Any, None], what: str) -> None:
        bot.spawn(coro, what)

    async def on_home_opened(body: dict[str, Any], event: dict[str, Any]) -> None:
        user = str(event.get("user") or "")
        if event.get("tab", "home") != "home" or not user:
            return  # the Messages tab: nothing to publish
        event_id = str(body.get("event_id") or "")

        async def once() -> None:
            if event_id and await bot.first_delivery(event_id) is False:
                return  # a retry of an open already published (a store that did not answer: publish anyway)
            await publisher.opened(user)

        spawn(once(), "home")

    async def on_refresh(ack: AsyncAck, body: dict[str, Any]) -> None:
        await ack()
        user = str((body.get("user") or {}).get("id") or "")
        # Each Refresh probes every node: the same per-person limit as questions keeps a stuck mouse cheap.
        if user and (await bot.check_rate(user)).allowed:  # counted over every replica
            spawn(publisher.publish_now(user), "home-refresh")
        elif user:
            log.info("home refresh rate-limited", extra={"event": "slack-home", "user": user})

    async def on_restart(ack: AsyncAck, body: dict[str, Any], action: dict[str, Any]) -> None:
        await ack()
        user = str((body.get("user") or {}).get("id") or "")
        log.info("slack action", extra={"event": "slack-action", "action": RESTART, "user": user})
        if user:
            spawn(restart_clicked(rt, app.client, user, str(action.get("value") or "")), "home-restart")

    app.event("app_home_opened")(on_home_opened)
    bot.registered.events.add("app_home_opened")
    app.action(REFRESH)(on_refresh)
    app.action(RESTART)(on_restart)
    bot.registered.actions.update({REFRESH, RESTART})
    return publisher
