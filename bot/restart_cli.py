"""``inferbot restart SERVICE [--force] [--wait] [--yes SERVICE] [--clear-lock]``: the guarded restart from a terminal.

Whoever has the config and a shell passes the "who" check; everything else is the Slack flow's: the same
state checks (reachable, nothing in flight, cooldown unless ``--force``), the same impact, the same single
execution and audit. Instead of a button the person types the service name back (``--yes NAME`` for
scripts). With ``--wait`` the load is followed with a live progress line until ready (exit 0) or failed
(exit 1). Without it, a running ``inferbot serve`` on the same state database picks the load up; with no
bot running, the next ``inferbot restart`` sees that the load is over and ends its lock. ``--clear-lock``
shows and clears (audited) a lock whose restart is stuck. The audit names the OS user:
``terminal:alice`` (``terminal:root (sudo by alice)`` under sudo).
"""

from __future__ import annotations

import asyncio
import getpass
import os
import sys
from typing import TextIO

from bot.app import runtime
from bot.terminal import shown, shown_line
from config.models import BotConfig, Service
from handlers.audit import record
from handlers.confirmable.flow import confirm_typed
from handlers.context import Asker, Context
from handlers.follow import follow_key, poll_follow
from handlers.notify import RecordingNotifier
from handlers.restart import FORCED, RESTART, clear_lock, impact, state_checks
from handlers.restart_diff import leftover_section
from services import mentions

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
WHO = "terminal"


def terminal_user() -> str:
    """Who runs this terminal command, for the audit: ``terminal:<user>``, and the sudo caller when there is one."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for the uid (containers)
        user = f"uid {os.getuid()}"
    who = f"{WHO}:{user}"
    sudo = os.environ.get("SUDO_USER")
    if sudo and sudo != user:
        who += f" (sudo by {sudo})"
    return who[:200]


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
                      *, out: TextIO | None = None, clear: bool = False) -> int:
    """The terminal restart (or, with ``clear``, clearing its in-flight lock); returns the exit status."""
    out = out or sys.stdout

    def say(text: str) -> None:
        # What is printed quotes the node (the impact, refusals, the outcome): shown, never obeyed (bot.terminal).
        print(shown(text), file=out)

    svc, problem = _pick(config, service)
    if svc is None:
        say(problem)
        return EXIT_USAGE
    who = terminal_user()
    async with runtime(config) as core:
        ctx = core.with_ports(notifier=RecordingNotifier()).context(Asker(surface="cli", user_id=who))
        if clear:
            _removed, cleared = await clear_lock(ctx, svc)
            say(mentions.plain(cleared))
            return EXIT_OK
        refusal, st = await state_checks(ctx, svc, force)
        if refusal is not None:
            await record(ctx, "restart.refused", svc.name, svc.node, refusal)
            say(mentions.plain(refusal))
            return EXIT_REFUSED
        fields, unavailable, _facts = await impact(ctx, svc, st)
        say(f"Restart {svc.name} on {svc.node} — {unavailable}.")
        for k, v in fields:
            say(f"  {k:<14} {mentions.plain(v)}")
        for section in leftover_section(st, svc)[0]:  # leftover vLLM processes holding GPU memory
            say(f"  {mentions.plain(section.text or '')}")
        if force:
            say("  (forced past the cooldown; recorded as forced)")
        typed = confirm if confirm is not None else await _ask(
            shown_line(f"Type the service name ({svc.name}) to restart it: "))
        if typed.strip() != svc.name:
            text = f"refused: you typed {typed.strip()!r}, not {svc.name!r} — nothing was restarted"
            await record(ctx, "restart.refused", svc.name, svc.node, text)
            say(text)
            return EXIT_REFUSED
        outcome = await confirm_typed(ctx, RESTART, svc, who, unavailable + (FORCED if force else ""), force)
        said = outcome.message.data.get("notice") if outcome.message is not None else outcome.ephemeral
        say(mentions.plain(str(said or "")))
        for section in outcome.message.sections[2:] if outcome.message is not None else []:
            say(f"  {section.title or ''}: {mentions.plain(section.text or '')}")
        if not outcome.executed or (outcome.message is not None and outcome.message.status == "error"):
            return EXIT_REFUSED
        if not wait:
            say("Not waiting (use --wait to follow the load); `inferbot serve` on this state database "
                "posts the ready notice, and the lock ends when the load is seen ready or failed.")
            return EXIT_OK
        try:
            return await _follow(ctx, follow_key(svc.name, svc.node), config.watch.poll, out)
        except asyncio.CancelledError:  # Ctrl-C: the load goes on, and so does whoever follows it next
            say(f"\nStopped following. The restart lock ends when the load is seen ready or failed "
                f"(by `inferbot serve`, or the next `inferbot restart {svc.name}`).")
            raise


async def _follow(ctx: Context, key: str, poll_s: float, out: TextIO) -> int:
    live = out.isatty() if hasattr(out, "isatty") else False
    while True:
        # No notifier: the terminal cannot post to Slack, so the notices are left to `inferbot serve`
        # (marking them sent here would lose them); the outcome and the lock are settled all the same.
        status = await poll_follow(ctx, key, None)
        if status.finished or status.outcome is not None:
            if live:
                print("\r\x1b[2K", end="", file=out)
            print(shown(status.line), file=out)  # a failure quotes the node's journal
            return EXIT_OK if status.outcome == "ready" else EXIT_REFUSED
        # One line, rewritten in place: only our own carriage return and erase-line may act on the terminal.
        line = shown_line(status.line or "waiting…")
        if live:
            print(f"\r\x1b[2K{line}", end="", file=out, flush=True)
        else:
            print(f"\r{line}", file=out, flush=True)
        await asyncio.sleep(min(poll_s, 5.0))
