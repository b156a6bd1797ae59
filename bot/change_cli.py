"""``inferbot change SERVICE --set NAME=VALUE --unset NAME --env NAME=VALUE --unset-env NAME [--yes SERVICE]
[--wait]`` and ``inferbot revert SERVICE [--yes SERVICE] [--wait]``: a settings change from a terminal.

The same change as ``set … on kimi`` in Slack (``handlers/change/``): the restart's checks on every node, the
preflight, the preview, then — instead of a button — the service name typed back (``--yes NAME`` for scripts);
the request is confirmed and run by the one flow (``confirm_typed``). ``SERVICE`` is ``kimi`` (every node it runs
on: one first, the others once it is verified) or ``kimi@gpu-a``. With ``--wait`` the command ticks the change
until it is kept (exit 0) or rolled back / failed (exit 1); without it, ``inferbot serve`` on the same state
database carries it on. Its notices are left to ``inferbot serve`` (a terminal posts nothing to Slack).
Exit 2: bad usage (an unknown service, nothing to change), with one line.
"""

from __future__ import annotations

import asyncio
import sys
from typing import TextIO

from bot.app import runtime
from bot.render_text import render_section
from bot.restart_cli import EXIT_OK, EXIT_REFUSED, EXIT_USAGE, terminal_user
from bot.terminal import shown, shown_line
from config.models import BotConfig, Service
from handlers.audit import record
from handlers.change import machine
from handlers.change.guard import where_it_is
from handlers.change.kind import CHANGE, ChangeKind
from handlers.confirmable.flow import confirm_typed
from handlers.confirmable.kind import Asked, Preview, Refusal
from handlers.context import Asker, Context, Request
from handlers.follow import follow_key, poll_follow
from handlers.notify import RecordingNotifier
from handlers.reply import Section
from services import mentions
from services.change.spec import ChangeSpec, SpecError, parse_options


def _services(config: BotConfig, name: str) -> tuple[list[Service], str]:
    svc_name, _, node = name.partition("@")
    found = [s for s in config.services if s.name == svc_name and (not node or s.node == node)]
    if found:
        return found, ""
    known = ", ".join(sorted({f"{s.name}@{s.node}" for s in config.services})) or "none"
    return [], f"inferbot: no service called {name!r} in the config (known: {known})"


async def _ask(prompt: str) -> str:
    try:
        return await asyncio.to_thread(input, prompt)
    except EOFError:
        return ""


class _Out:
    def __init__(self, out: TextIO) -> None:
        self.out = out

    def say(self, text: str) -> None:
        # Node text is quoted in all of it (the preflight, the drop-in, refusals): shown, never obeyed.
        print(shown(mentions.plain(text)), file=self.out)

    def sections(self, sections: list[Section]) -> None:
        for s in sections:
            self.say(render_section(s))


async def run_change(config: BotConfig, service: str, op: str, *, sets: list[str] | None = None,
                     unsets: list[str] | None = None, envs: list[str] | None = None,
                     unset_envs: list[str] | None = None, wait: bool = False, confirm: str | None = None,
                     out: TextIO | None = None) -> int:
    """The terminal change (``op`` "change") or revert (``op`` "revert"); returns the exit status."""
    o = _Out(out or sys.stdout)
    services, problem = _services(config, service)
    if not services:
        o.say(problem)
        return EXIT_USAGE
    spec: ChangeSpec | None = None
    if op == "change":
        if not (sets or unsets or envs or unset_envs):
            o.say("inferbot: nothing to change: give --set NAME=VALUE, --unset NAME, --env NAME=VALUE or "
                  "--unset-env NAME")
            return EXIT_USAGE
        parsed = parse_options(sets or [], unsets or [], envs or [], unset_envs or [])
        if isinstance(parsed, SpecError):
            o.say(f"refused: {parsed.message} — nothing was written")
            return EXIT_REFUSED
        spec = parsed
    who = terminal_user()
    async with runtime(config) as rt:
        ctx = rt.with_ports(notifier=RecordingNotifier()).context(Asker(surface="cli", user_id=who))
        first = services[0]
        kind = ChangeKind(op, tuple(s.node for s in services), spec)
        asked = Asked(first, Request(intent=op, services=[first], nodes=[config.node(first.node)],
                                     explicit_target=True))
        prepared = await kind.prepare(ctx, asked)
        if not isinstance(prepared, Preview):
            refusal = prepared if isinstance(prepared, Refusal) else Refusal(prepared)
            await record(ctx, "change.refused", first.name, first.node, refusal.text)
            o.say(refusal.text)
            o.sections(refusal.sections)
            return EXIT_REFUSED
        o.sections(prepared.sections)
        return await _confirm(ctx, o, services, prepared, confirm, wait, op)


async def _confirm(ctx: Context, o: _Out, services: list[Service], preview: Preview, confirm: str | None,
                   wait: bool, op: str) -> int:
    first = services[0]
    typed = confirm if confirm is not None else await _ask(
        shown_line(f"Type the service name ({first.name}) to {op} it: "))
    if typed.strip() != first.name:
        text = f"refused: you typed {typed.strip()!r}, not {first.name!r} — nothing was changed"
        await record(ctx, "change.refused", first.name, first.node, text, request_id=preview.request_id)
        o.say(text)
        return EXIT_REFUSED
    outcome = await confirm_typed(ctx, CHANGE, first, terminal_user(), preview.detail, False,
                                  request_id=preview.request_id)
    said = outcome.message.data.get("notice") if outcome.message is not None else outcome.ephemeral
    o.say(str(said or ""))
    if not outcome.executed or (outcome.message is not None and outcome.message.status == "error"):
        return EXIT_REFUSED
    if not wait:
        o.say("Not waiting (use --wait to follow it): `inferbot serve` on this state database follows the load, "
              "verifies the change and keeps it or rolls it back, and posts its notices.")
        return EXIT_OK
    assert preview.request_id is not None
    try:
        return await _wait(ctx, o, preview.request_id)
    except asyncio.CancelledError:  # Ctrl-C: the change goes on, and whoever ticks it next finishes it
        o.say("\nStopped waiting. `inferbot serve` (or `--wait` again) carries the change on.")
        raise


async def _wait(ctx: Context, o: _Out, change_id: str) -> int:
    """Tick the change (and follow its loads) until it is decided; 0 only when it is kept."""
    poll = min(ctx.config.watch.poll, 5.0)
    last = ""
    while True:
        ch = await ctx.store.changes.get(change_id) if ctx.store is not None else None
        for step in ch.steps if ch is not None else []:
            if step.state in ("loading", "restoring"):
                # No notifier: the load's notices are left to `inferbot serve`; its end is decided all the same.
                await poll_follow(ctx, follow_key(ch.service if ch else "", step.node), None)
        tick = await machine.advance(ctx, change_id, None)
        if tick.change is None:
            o.say("the change was lost")
            return EXIT_REFUSED
        line = f"change #{tick.change.number} of {tick.change.service}: {where_it_is(tick.change)}"
        if tick.decided:
            o.say(f"change #{tick.change.number} of {tick.change.service}: {tick.change.outcome or tick.change.state}")
            for step in tick.change.steps:
                if step.reason or step.detail:
                    o.say(f"  {step.node}: {step.state} — {step.reason or ''} {step.detail or ''}".rstrip())
            return EXIT_OK if tick.ok else EXIT_REFUSED
        if line != last:
            o.say(line)
            last = line
        await asyncio.sleep(poll)
