"""Running the Slack bot: Socket Mode or HTTP (``/slack/events`` and ``/healthz``), the heartbeat file, the
scheduler and a clean stop on SIGINT/SIGTERM (``inferbot serve``)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from aiohttp import web
from slack_bolt.app.async_app import AsyncApp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from bot.app import runtime
from bot.slack.app import bot_of, build_app, state_of
from bot.slack.client import TOKEN_HELP, MissingToken, Tokens, api_base_url, load_tokens, make_client
from bot.slack.runtime import slack_runtime
from bot.terminal import shown
from config.models import BotConfig
from services.redact import Secret

log = logging.getLogger("inferbot.slack")

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2


def _heartbeat_path(config: BotConfig) -> Path:
    return config.state.directory() / "heartbeat"


def _touch(path: Path, role: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{time.time():.0f}{' ' + role if role else ''}\n", encoding="utf-8")


async def _heartbeat(path: Path, alive: Callable[[], Awaitable[bool]], every: float = 30.0,
                     role: Callable[[], str | None] = lambda: None) -> None:
    """Touch ``path`` while the app is connected/serving (the Docker HEALTHCHECK reads its age); the line
    says ``leader`` or ``standby``."""
    while True:
        try:
            if await alive():
                await asyncio.to_thread(_touch, path, role())
        except OSError as e:
            log.debug("heartbeat not written", extra={"reason": e.strerror})
        await asyncio.sleep(every)


async def health(_: web.Request) -> web.Response:
    return web.Response(text="ok")


def http_app(app: AsyncApp) -> web.Application:
    """Bolt's aiohttp app on ``/slack/events`` (events, commands, interactivity) plus ``GET /healthz``
    (``ok``; ``ok leader`` / ``ok standby`` once the scheduler campaigns, also in ``X-Inferbot-Role``)."""
    web_app: web.Application = app.web_app(path="/slack/events")
    bot = bot_of(app)

    async def health_role(request: web.Request) -> web.Response:
        role = bot.role() if bot is not None else None
        if role is None:
            return await health(request)
        return web.Response(text=f"ok {role}", headers={"X-Inferbot-Role": role})

    web_app.router.add_get("/healthz", health_role)
    return web_app


async def start_http(app: AsyncApp, host: str, port: int) -> web.AppRunner:
    """Serve the app over HTTP; the caller cleans up the returned runner."""
    runner = web.AppRunner(http_app(app), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner


async def _check_auth(client: AsyncWebClient, app_token: Secret | None) -> str | None:
    """One line if a token is refused by Slack, else None (catches typos before Socket Mode loops forever)."""
    try:
        await client.auth_test()
    except SlackApiError as e:
        return f"SLACK_BOT_TOKEN was refused by Slack ({e.response.get('error')}): {TOKEN_HELP['SLACK_BOT_TOKEN']}"
    if app_token is not None:
        try:
            await client.apps_connections_open(app_token=app_token.reveal())
        except SlackApiError as e:
            return (f"SLACK_APP_TOKEN was refused by Slack ({e.response.get('error')}): "
                    f"{TOKEN_HELP['SLACK_APP_TOKEN']}")
    return None


async def serve(config: BotConfig, http: bool, host: str, port: int, *,
                stop: asyncio.Event | None = None) -> int:
    """Run the bot until SIGINT/SIGTERM (or ``stop``): Socket Mode by default, the Events API with ``http``."""
    try:
        tokens = await asyncio.to_thread(load_tokens, http)  # *_FILE may be read: not in the event loop
    except MissingToken as e:
        print(shown(f"inferbot: {e}"), file=sys.stderr)
        return EXIT_USAGE
    base_url = api_base_url(config.slack)
    client = make_client(tokens.bot, base_url)
    try:
        problem = await _check_auth(client, tokens.app)
    except (TimeoutError, SlackClientError, OSError) as e:
        problem = f"cannot reach the Slack Web API at {base_url} ({type(e).__name__})"
    if problem:
        print(shown(f"inferbot: {problem}"), file=sys.stderr)
        if client.session is not None:
            await client.session.close()
        return EXIT_USAGE
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    signals: list[signal.Signals] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
            signals.append(sig)
    try:
        return await _serve(config, http, host, port, tokens, client, stop)
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
        if client.session is not None:
            await client.session.close()


async def _serve(config: BotConfig, http: bool, host: str, port: int, tokens: Tokens, client: AsyncWebClient,
                 stop: asyncio.Event) -> int:
    async with runtime(config) as core:
        from bot.replicas import open_leadership
        from bot.scheduler import BotScheduler

        leadership = await open_leadership(core)  # the schema is checked/upgraded here: one line if it can't be
        if isinstance(leadership, str):
            print(shown(f"inferbot: {leadership}"), file=sys.stderr)
            return EXIT_USAGE
        # Follow loads, watch for unplanned restarts, expire requests (jobs in the state DB): the runtime's
        # jobs port, started below with the runtime it belongs to.
        scheduler = BotScheduler()
        rt = slack_runtime(core, client, jobs=scheduler)  # built once, complete: every listener and job gets it
        app = build_app(rt, config.slack, signing_secret=tokens.signing, role=lambda: leadership.role)
        bot = state_of(app)
        cleanup: Callable[[], Awaitable[None]]
        alive: Callable[[], Awaitable[bool]]
        if http:
            try:
                runner = await start_http(app, host, port)
            except OSError as e:
                print(f"inferbot: cannot listen on {host}:{port} ({e.strerror})", file=sys.stderr)
                return EXIT_FAILURE
            cleanup = runner.cleanup

            async def alive_http() -> bool:
                return True

            alive = alive_http
            log.info("serving", extra={"event": "serve", "mode": "http", "host": host, "port": port})
        else:
            from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler

            assert tokens.app is not None
            handler = AsyncSocketModeHandler(app, tokens.app.reveal())  # needs the running loop
            try:
                await asyncio.wait_for(handler.connect_async(), 30)  # type: ignore[no-untyped-call]
            except TimeoutError:
                await handler.close_async()  # type: ignore[no-untyped-call]
                print("inferbot: could not open the Socket Mode connection within 30 s", file=sys.stderr)
                return EXIT_FAILURE
            cleanup = handler.close_async
            alive = handler.client.is_connected
            log.info("serving", extra={"event": "serve", "mode": "socket"})
        beat = asyncio.create_task(_heartbeat(_heartbeat_path(config), alive, role=bot.role))
        await scheduler.start(rt, leadership=leadership)
        try:
            await stop.wait()
        finally:
            beat.cancel()
            await scheduler.shutdown()
            rt.dashboards.close()  # the App Home republisher's pending rounds (its state is in the store)
            await cleanup()
            await bot.drain()
    return EXIT_OK
