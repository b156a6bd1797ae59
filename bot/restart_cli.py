"""``inferbot restart SERVICE [--force] [--wait] [--yes SERVICE]``: the guarded restart from a terminal.

Whoever has the config and a shell passes the "who" check; everything else is the Slack flow's: the same
state checks (reachable, nothing in flight, cooldown unless ``--force``), the same impact, the same single
execution and audit. Instead of a button the person types the service name back (``--yes NAME`` for
scripts). With ``--wait`` the load is followed with a live progress line until ready (exit 0) or failed
(exit 1). Without it, a running ``inferbot serve`` on the same state database picks the load up.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from typing import TextIO

from bot.app import runtime
from config.models import BotConfig, Service
from handlers.audit import record
from handlers.context import Asker, Context
from handlers.follow import follow_key, poll_follow
from handlers.notify import RecordingNotifier
from handlers.restart import impact, new_request_id, run_confirmed, state_checks

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
WHO = "terminal"


def _pick(config: BotConfig, name: str) -> tuple[Service | None, str]:
    svc_name, _, node = name.partition("@")
    found = [s for s in config.services if s.name == svc_name and (not node or s.node == node)]
    if len(found) == 1:
        return found[0], ""
    known = ", ".join(sorted({f"{s.name}@{s.node}" for s in config.services})) or "none"
    if not found:
        return None, f"inferbot: no service called {name!r} in the config (known: {known})"
    return None, f"inferbot: {svc_name!r} runs on several nodes; name one as SERVICE@NODE (known: {known})"


async def _ask(prompt: str) -> str:
    try:
        return await asyncio.to_thread(input, prompt)
    except EOFError:
        return ""


async def run_restart(config: BotConfig, service: str, force: bool, wait: bool, confirm: str | None,
                      *, out: TextIO | None = None) -> int:
    """The terminal restart; returns the exit status."""
    out = out or sys.stdout
    svc, problem = _pick(config, service)
    if svc is None:
        print(problem, file=out)
        return EXIT_USAGE
    async with runtime(config) as rt:
        notifier = RecordingNotifier()
        rt.notifier = notifier
        ctx = rt.context(Asker(surface="cli"))
        store = rt.store
        assert store is not None
        refusal, st = await state_checks(ctx, svc, force)
        if refusal is not None:
            await record(ctx, "restart.refused", svc.name, svc.node, refusal)
            print(refusal, file=out)
            return EXIT_REFUSED
        fields, unavailable, _facts = await impact(ctx, svc, st)
        print(f"Restart {svc.name} on {svc.node} — {unavailable}.", file=out)
        for k, v in fields:
            print(f"  {k:<14} {v}", file=out)
        if force:
            print("  (forced past the cooldown; recorded as forced)", file=out)
        typed = confirm if confirm is not None else await _ask(f"Type the service name ({svc.name}) to restart it: ")
        if typed.strip() != svc.name:
            text = f"refused: you typed {typed.strip()!r}, not {svc.name!r} — nothing was restarted"
            await record(ctx, "restart.refused", svc.name, svc.node, text)
            print(text, file=out)
            return EXIT_REFUSED
        now = ctx.now()
        request_id = "t-" + new_request_id().removeprefix("r-")
        await store.create_request(request_id, svc.name, svc.node, svc.unit, WHO, None, None, now,
                                   now + timedelta(minutes=5), force)
        await record(ctx, "restart.requested", svc.name, svc.node, f"from the terminal; {unavailable}"
                     + ("; FORCED past the cooldown" if force else ""), request_id=request_id)
        await store.transition_request(request_id, {"pending"}, "confirmed", WHO, now)
        await record(ctx, "restart.confirmed", svc.name, svc.node, "typed the name back", request_id=request_id)
        req = await store.get_request(request_id)
        assert req is not None
        outcome = await run_confirmed(ctx, req, svc, config.access_for(svc), WHO, now)
        said = outcome.message.data.get("notice") if outcome.message is not None else outcome.ephemeral
        print(said or "", file=out)
        for section in outcome.message.sections[2:] if outcome.message is not None else []:
            print(f"  {section.title or ''}: {section.text}", file=out)
        if not outcome.executed or (outcome.message is not None and outcome.message.status == "error"):
            return EXIT_REFUSED
        if not wait:
            print("Not waiting (use --wait to follow the load); `inferbot serve` on this state database "
                  "posts the ready notice.", file=out)
            return EXIT_OK
        return await _follow(ctx, follow_key(svc.name, svc.node), notifier, config.watch.poll, out)


async def _follow(ctx: Context, key: str, notifier: RecordingNotifier, poll_s: float, out: TextIO) -> int:
    live = out.isatty() if hasattr(out, "isatty") else False
    while True:
        status = await poll_follow(ctx, key, notifier)
        if status.finished:
            if live:
                print("\r\x1b[2K", end="", file=out)
            print(status.line, file=out)
            return EXIT_OK if status.outcome == "ready" else EXIT_REFUSED
        line = status.line or "waiting…"
        if live:
            print(f"\r\x1b[2K{line}", end="", file=out, flush=True)
        else:
            print(f"\r{line}", file=out, flush=True)
        await asyncio.sleep(min(poll_s, 5.0))
