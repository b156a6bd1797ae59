"""Route a message, call its handler, and never let an exception reach the person who asked."""

from __future__ import annotations

import gc
import logging
import time

from bot.router import Aliases, Intent, route, service_aliases
from handlers.context import Context, Request
from handlers.reply import Reply, Section

log = logging.getLogger("inferbot.dispatch")

COLLECT_FROM_NODES = 64
"""An answer about this many nodes or more is followed by one full collection of the garbage collector."""


def unknown_target_reply(intent: Intent, ctx: Context) -> Reply:
    """A friendly answer naming the unknown service/node and what exists."""
    names = sorted({s.name for s in ctx.config.services})
    nodes = sorted({n.name for n in ctx.config.nodes})
    what = ", ".join(f"“{u}”" for u in intent.unknown)
    text = f"I don't know a service or node called {what}"
    if intent.suggestions:
        text += " — did you mean " + " or ".join(f"“{s}”" for s in intent.suggestions) + "?"
    else:
        text += "."
    known = []
    if names:
        known.append("services: " + ", ".join(names))
    if nodes:
        known.append("nodes: " + ", ".join(nodes))
    return Reply(
        intent=intent.command.name, ok=False, title="Unknown service or node", status="warn",
        sections=[Section(kind="text", text=text)]
        + ([Section(kind="context", text="Known " + "; ".join(known))] if known else []),
        data={"unknown": intent.unknown, "suggestions": intent.suggestions, "services": names, "nodes": nodes},
        error=text,
    )


async def aliases_of(ctx: Context) -> Aliases:
    """Served model names and model paths of each configured service, from its last snapshot in the store.

    The router stays pure: this is read here, only for a message with a word the config does not name, and
    handed to it. A store that fails only costs the aliases (names and units still route).
    """
    served: dict[tuple[str, str], list[str]] = {}
    if ctx.store is not None and ctx.config.services:
        try:
            for svc in ctx.config.services:
                snaps = await ctx.store.snapshots.latest(svc.name, svc.node, limit=1)
                if not snaps:
                    continue
                names = snaps[0].flags.get("served-model-name")
                found = [str(n) for n in (names if isinstance(names, list) else [names]) if n]
                if snaps[0].model:
                    found.append(snaps[0].model)
                served[(svc.name, svc.node)] = found
        except Exception:
            log.warning("state store unavailable; routing without model-name aliases", exc_info=True)
    return service_aliases(ctx.config, served)


async def answer(text: str, ctx: Context) -> Reply:
    """The whole path for one message: route → handler → ``Reply`` (errors become friendly replies)."""
    started = time.monotonic()
    intent = route(text, ctx.config)
    if intent.unknown:
        # Only a word that names nothing costs the store lookup of model names (most messages never do).
        intent = route(text, ctx.config, await aliases_of(ctx))
    outcome = "ok"
    try:
        # A word that names nothing we know is never silently dropped ("status gpu-c" is not "status").
        if intent.unknown:
            reply = unknown_target_reply(intent, ctx)
            outcome = "unknown-target"
        else:
            args = dict(intent.args)
            if not intent.matched:
                hint = "I didn't understand that."
                if intent.suggestions:
                    hint += " Did you mean " + " or ".join(f"“{s}”" for s in intent.suggestions) + "?"
                args["unknown"] = hint
                outcome = "not-understood"
            req = Request(intent=intent.command.name, services=intent.services, nodes=intent.nodes,
                          explicit_target=intent.explicit_target, args=args)
            reply = await intent.command.handler(ctx, req)
            if not intent.matched and text.strip():
                # Help was the fallback, not the answer to what was asked.
                reply = reply.model_copy(update={"ok": False, "error": "not understood"})
    except Exception:
        # The person gets a short apology; the traceback goes to the log (it holds no message text).
        log.exception("handler %s failed", intent.command.name)
        outcome = "error"
        reply = Reply(intent=intent.command.name, ok=False, title="Something went wrong", status="error",
                      sections=[Section(kind="text", text="Sorry — I hit an internal error answering that. "
                                        "It has been logged; please try again or ask an operator.")],
                      error="internal error")
    log.info(
        "answered",
        extra={"event": "answer", "intent": intent.command.name, "user": ctx.asker.user_id,
               "channel": ctx.asker.channel_id, "surface": ctx.asker.surface,
               "nodes": [n.name for n in intent.nodes], "ms": int((time.monotonic() - started) * 1000),
               "outcome": outcome},
    )
    if len(intent.nodes) >= COLLECT_FROM_NODES:
        # asyncssh leaves each finished command in reference cycles (its process, channel and streams) and the
        # long-running bot's collector runs seldom (bot/app.py GC_THRESHOLDS). Collected here, once the handler
        # has let go of its records, that memory is reused by the front end's rendering instead of adding to the
        # peak; below this many nodes there is too little of it to pay for walking the heap.
        gc.collect()
    return reply
