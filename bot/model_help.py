"""Opt-in: a message the rules cannot place is classified by the cluster's own model (``[understanding] model``).

The detour is taken only for a message the router did not place (its short help would answer otherwise),
only while the named service is ready, and only within ``[understanding] timeout`` for the whole of it (the
look at the service and the model's answer): a person is waiting. Any failure — the service loading or down,
the node unreachable, a slow or broken server, an answer that is not the schema's, names the config does not
know, an order — leaves the message unplaced, exactly as if the model had not been asked. The request goes
from the node like every other one (``services/node/chat.py``); what may come back is fixed in
``bot/understanding/model_answer.py``, and it never holds an order.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace

from bot.router import Intent
from bot.understanding import model_answer
from bot.understanding.markup import Message
from handlers.commands import command
from handlers.context import Args, Context
from services.cluster import held_api_key
from services.node.assemble import expected_model
from services.node.chat import ChatMessage, ChatRequest, run_chat
from services.node.probe import ProbeOptions

log = logging.getLogger("inferbot.model_help")

# Enough to know the service is ready, its URL and its served name: the unit and the process's command line
# and /health, nothing slow.
READY_PROBE = ProbeOptions(gpus=False, journal_lines=0, metrics_samples=0, http_timeout_s=0.5, api_info=False)


@dataclass(frozen=True)
class Helped:
    """A message placed with the model's help: the reading, and the service whose model helped."""

    reading: Intent
    by: str


def wants_help(intent: Intent, text: str | Message) -> bool:
    """The rules placed nothing in a message with words in it (a word that names nothing gets its own answer)."""
    plain = text.plain if isinstance(text, Message) else text
    return not intent.matched and not intent.unknown and bool(plain.strip())


async def consult(text: str | Message, intent: Intent, ctx: Context) -> Helped | None:
    """The model's reading of ``text`` when ``[understanding] model`` is set and it can help; else None."""
    settings = ctx.config.understanding
    if settings.model is None or not wants_help(intent, text):
        return None
    try:
        return await asyncio.wait_for(_ask(text, intent, ctx, settings.model), settings.timeout)
    except TimeoutError:
        log.info("model help skipped: %s did not answer within %g s", settings.model, settings.timeout)
    except Exception:
        # Never the person's words nor the model's answer: the traceback holds neither.
        log.warning("model help failed", exc_info=True)
    return None


async def _ask(text: str | Message, intent: Intent, ctx: Context, helper: str) -> Helped | None:
    config = ctx.config
    services = [s for s in config.services if s.name == helper]
    nodes = [n for n in config.nodes if n.name in {s.node for s in services}]
    snap = await ctx.cluster.snapshot(services, nodes, READY_PROBE, node_gpus=False)
    ready = next((st for st in snap.services if st.state == "ready" and st.api_url and expected_model(st)), None)
    if ready is None or ready.api_url is None:
        log.info("model help skipped: %s is not ready", helper)
        return None
    served = expected_model(ready)
    service = config.service(ready.service, ready.node)
    if served is None or service is None:
        return None
    plain = text.plain if isinstance(text, Message) else text
    request = ChatRequest(
        model=served, schema_name=model_answer.SCHEMA_NAME, json_schema=model_answer.schema(config),
        messages=[ChatMessage(role="system", content=model_answer.instructions(config)),
                  ChatMessage(role="user", content=model_answer.user_text(plain))])
    result = await run_chat(ctx.cluster.pool, config.node(ready.node), ready.api_url, request,
                            held_api_key(service), config.understanding.timeout)
    if result.outcome != "ok" or result.content is None:
        # The server's error text may quote the message: only what failed is logged, not what it said.
        log.info("model help skipped: %s", result.detail.split(" — ", 1)[0])
        return None
    try:
        found = model_answer.validate(result.content, config)
    except model_answer.Refused as e:
        log.warning("model help refused the answer of %s: %s", helper, e)
        return None
    if found is None:
        log.info("model help: %s could not place the message either", helper)
        return None
    log.info("model help: %s placed the message as %s", helper, found.intent)
    reading = replace(intent, command=command(found.intent), intent=found.intent, services=found.services,
                      nodes=found.nodes, explicit_target=found.explicit_target, args=Args(), matched=True,
                      asked=False, offers=[], note=None, named_services=found.named_services,
                      named_nodes=found.named_nodes)
    return Helped(reading, helper)
