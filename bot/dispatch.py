"""Route a message, call its handler, and never let an exception reach the person who asked."""

from __future__ import annotations

import importlib
import logging
import time
from typing import cast

from bot.commands import Command, Handler
from bot.router import Intent, route
from handlers.context import Context, Request
from handlers.reply import Reply, Section

log = logging.getLogger("inferbot.dispatch")


def _handler(cmd: Command) -> Handler:
    module, _, func = cmd.handler_path.partition(":")
    return cast(Handler, getattr(importlib.import_module(module), func))


def unknown_target_reply(intent: Intent, ctx: Context) -> Reply:
    """A friendly answer naming the unknown service/node and what exists."""
    names = sorted({s.name for s in ctx.config.services})
    nodes = sorted({n.name for n in ctx.config.nodes})
    what = ", ".join(f"“{u}”" for u in intent.unknown)
    text = f"I don't know a service or node called {what}."
    if intent.suggestions:
        text += " Did you mean " + " or ".join(f"“{s}”" for s in intent.suggestions) + "?"
    known = []
    if names:
        known.append("services: " + ", ".join(names))
    if nodes:
        known.append("nodes: " + ", ".join(nodes))
    return Reply(
        intent=intent.command.name, ok=True, title="Unknown service or node", status="warn",
        sections=[Section(kind="text", text=text)]
        + ([Section(kind="context", text="Known " + "; ".join(known))] if known else []),
        data={"unknown": intent.unknown, "suggestions": intent.suggestions, "services": names, "nodes": nodes},
    )


async def answer(text: str, ctx: Context) -> Reply:
    """The whole path for one message: route → handler → ``Reply`` (errors become friendly replies)."""
    started = time.monotonic()
    intent = route(text, ctx.config)
    outcome = "ok"
    try:
        if intent.unknown and not (intent.services and intent.explicit_target):
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
            reply = await _handler(intent.command)(ctx, req)
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
    return reply
