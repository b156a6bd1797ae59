"""Route a message, call its handler, and never let an exception reach the person who asked."""

from __future__ import annotations

import gc
import logging
import time

from bot import model_help
from bot.router import Aliases, Intent, route, service_aliases
from bot.shared_answers import SharedAnswers, share_key
from bot.understanding.commands_text import command_text
from bot.understanding.markup import Message
from handlers import help as help_handler
from handlers.context import Context, Request, Understood
from handlers.reply import Reply, Section
from services.node.probe import ProbeOptions

log = logging.getLogger("inferbot.dispatch")

COLLECT_FROM_NODES = 64
"""An answer about this many nodes or more is followed by one full collection of the garbage collector."""

# What a fresh bot asks the nodes to learn served model names and model paths: the unit and the process's
# command line, nothing slow (no GPUs, journal, /metrics or API).
NAMES_PROBE = ProbeOptions(gpus=False, journal_lines=0, metrics_samples=0, http_timeout_s=1.0, api_info=False)
MAX_SUGGESTIONS = help_handler.MAX_SUGGESTIONS
suggestion_actions = help_handler.suggestion_actions


def understood(intent: Intent, helped_by: str | None = None) -> Understood:
    """What the router read, as the reply says it back (``data.understood``); ``helped_by``: the service whose
    model placed it."""
    return Understood(
        intent=intent.intent or intent.command.name, services=intent.named_services, nodes=intent.named_nodes,
        score=intent.score, asked=intent.asked, suggestions=intent.offers, note=intent.note, helped_by=helped_by)


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
    verb = intent.intent if intent.intent and intent.intent != "unclear" else "status"
    commands = [command_text(verb, [s for s in ctx.config.services if s.name == n], [], intent.args)
                if n in names else command_text(verb, [], [n2 for n2 in ctx.config.nodes if n2.name == n])
                for n in intent.suggestions]
    return Reply(
        intent=intent.command.name, ok=False, title="Unknown service or node", status="warn",
        sections=[Section(kind="text", text=text)]
        + ([Section(kind="context", text="Known " + "; ".join(known))] if known else []),
        actions=suggestion_actions(commands),
        data={"unknown": intent.unknown, "suggestions": commands[:MAX_SUGGESTIONS], "services": names,
              "nodes": nodes},
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


async def probed_aliases(ctx: Context) -> Aliases:
    """Served model names and model paths as the nodes say them now: what a fresh bot, with nothing in its
    store, learns by asking (the unit and the running command line only)."""
    served: dict[tuple[str, str], list[str]] = {}
    if not ctx.config.services:
        return {}
    snap = await ctx.cluster.snapshot(ctx.config.services, ctx.config.nodes, NAMES_PROBE, node_gpus=False)
    for st in snap.services:
        names = st.flags.get("served-model-name")
        found = [str(n) for n in (names if isinstance(names, list) else [names]) if n]
        if st.model:
            found.append(st.model)
        served[(st.service, st.node)] = found
    return service_aliases(ctx.config, served)


async def read_message(text: str | Message, ctx: Context) -> Intent:
    """Route ``text``; a word where a name stands that the config does not know is looked up among the
    services' served model names and model paths (the store's, else the nodes' own)."""
    intent = route(text, ctx.config)
    if intent.unknown:
        # Only a word that names nothing costs the store lookup of model names (most messages never do).
        intent = route(text, ctx.config, await aliases_of(ctx))
    if intent.unknown:
        try:
            intent = route(text, ctx.config, await probed_aliases(ctx))
        except Exception:
            log.warning("could not ask the nodes for model names", exc_info=True)
    return intent


def _ask_back(intent: Intent) -> Reply:
    """Two readings nearly as good: a short question with a button for each."""
    offers = intent.offers[:MAX_SUGGESTIONS]
    text = "Did you mean " + " or ".join(f"`{c}`" for c in offers) + "?"
    return Reply(intent=intent.command.name, ok=False, title="Not sure what you meant", status="info",
                 sections=[Section(kind="text", text=text + " `help` for everything.")],
                 actions=suggestion_actions(offers), data={}, error="not sure what was meant")


async def _answer(intent: Intent, ctx: Context, text: str | Message) -> tuple[Reply, str]:
    """The reply for a routed message, and the outcome for the log."""
    if intent.unknown:
        return unknown_target_reply(intent, ctx), "unknown-target"
    u = understood(intent)
    req = Request(intent=intent.command.name, services=intent.services, nodes=intent.nodes,
                  explicit_target=intent.explicit_target, args=intent.args, understood=u)
    if not intent.matched:
        empty = not (text.plain if isinstance(text, Message) else text).strip()
        if empty:
            return await intent.command.handler(ctx, req), "ok"
        return help_handler.short(req), "not-understood"
    if intent.asked and not intent.note and len(intent.offers) >= 2:
        return _ask_back(intent), "asked"
    reply = await intent.command.handler(ctx, req)
    if intent.note:
        # An order in doubt: the answer about it, with the question first.
        reply.sections.insert(0, Section(kind="text", text=intent.note))
        reply.actions += suggestion_actions(intent.offers) if intent.command.name != "restarts" else []
        return reply, "asked"
    if intent.offers:
        also = ", ".join(f"`{c}`" for c in intent.offers[:MAX_SUGGESTIONS])
        reply.sections.append(Section(kind="context", text=f"You also asked: {also} — say it, or press it."))
        reply.actions += suggestion_actions(intent.offers)
    return reply, "ok"


async def answer(text: str | Message, ctx: Context, shared: SharedAnswers | None = None) -> Reply:
    """The whole path for one message: route → handler → ``Reply`` (errors become friendly replies).

    ``text`` is what was typed in the terminal, or a Slack message already read (``markup.read``).
    ``shared``: a front end answering many people at once passes its runtime's; then the same question asked
    while it is being answered gets a copy of that answer instead of running its handler again
    (``bot/shared_answers.py`` says which questions are the same).
    """
    started = time.monotonic()
    intent = await read_message(text, ctx)
    helped = await model_help.consult(text, intent, ctx)
    if helped is not None:
        intent = helped.reading
    outcome = "ok"
    # A reading the model made is answered for its asker alone: another's same-looking question was read by the
    # rules, and its answer does not say the model helped.
    key = share_key(intent, ctx) if shared is not None and helped is None else None
    made = True  # False: a copy of an answer someone else's question made (its garbage is not ours to collect)
    try:
        if shared is not None and key is not None:
            reply, outcome, made = await shared.answer(key, lambda: _answer(intent, ctx, text))
        else:
            reply, outcome = await _answer(intent, ctx, text)
    except Exception:
        # The person gets a short apology; the traceback goes to the log (it holds no message text).
        log.exception("handler %s failed", intent.command.name)
        outcome = "error"
        reply = Reply(intent=intent.command.name, ok=False, title="Something went wrong", status="error",
                      sections=[Section(kind="text", text="Sorry — I hit an internal error answering that. "
                                        "It has been logged; please try again or ask an operator.")],
                      error="internal error")
    if helped is not None:
        reply.sections.append(Section(kind="context", text=f"(understood with the help of {helped.by})"))
    by = helped.by if helped is not None else None
    # helped_by only when the model helped: every answer's data.understood stays as it was.
    reply.data.setdefault("understood", understood(intent, by).model_dump(exclude=None if by else {"helped_by"}))
    reply.data.setdefault("suggestions", list(intent.offers[:MAX_SUGGESTIONS]))
    log.info(
        "answered",
        extra={"event": "answer", "intent": intent.command.name, "user": ctx.asker.user_id,
               "channel": ctx.asker.channel_id, "surface": ctx.asker.surface,
               "nodes": [n.name for n in intent.nodes], "ms": int((time.monotonic() - started) * 1000),
               "outcome": outcome},
    )
    if made and len(intent.nodes) >= COLLECT_FROM_NODES:
        # asyncssh leaves each finished command in reference cycles (its process, channel and streams) and the
        # long-running bot's collector runs seldom (bot/app.py GC_THRESHOLDS). Collected here, once the handler
        # has let go of its records, that memory is reused by the front end's rendering instead of adding to the
        # peak; below this many nodes there is too little of it to pay for walking the heap.
        gc.collect()
    return reply
