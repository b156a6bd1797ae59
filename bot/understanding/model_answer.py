"""What the cluster's own model may say about a message the rules cannot place (issue 23, point 9).

The question is a JSON schema (vLLM's structured output): one intent out of a fixed list of *questions* — no
order is on it, so the model can never turn a message into a restart, a benchmark, a silence or a change —
and the configured names. Its answer is read back through :class:`ModelAnswer` and checked again against the
list and the config (a server that ignores the schema, or a model talked into something else, is refused).
Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from config.models import BotConfig, Node, Service
from handlers.commands import COMMANDS, command

# The questions the model may choose among. Every order (``confirm``) is left out on purpose, and so are the
# questions that need an argument it could not validate (``flag``: which flag) or that help already answers.
INTENTS: tuple[str, ...] = ("status", "settings", "throughput", "gpus", "logs", "restarts", "changes", "audit",
                            "chart_throughput", "chart_loads", "chart_bench")
UNCLEAR = "unclear"
MAX_NAMES = 16
TEXT_MAX = 2000  # of the person's message sent to the model: a classification needs no more
SCHEMA_NAME = "inferbot_intent"


class ModelAnswer(BaseModel):
    """The model's answer as the schema shapes it; anything else in it is refused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    intent: str = Field(max_length=64)
    services: list[str] = Field(default_factory=list, max_length=MAX_NAMES)
    nodes: list[str] = Field(default_factory=list, max_length=MAX_NAMES)


@dataclass(frozen=True)
class ModelReading:
    """An answer that passed: the question, and the services and nodes it is about (as the router gives them)."""

    intent: str
    services: list[Service]
    nodes: list[Node]
    explicit_target: bool
    named_services: list[str]
    named_nodes: list[str]


class Refused(Exception):
    """The model's answer was not used; the message says why (never the answer itself, which may echo the
    person's words)."""


def _names(config: BotConfig) -> tuple[list[str], list[str]]:
    return sorted({s.name for s in config.services}), sorted({n.name for n in config.nodes})


def schema(config: BotConfig) -> dict[str, object]:
    """The JSON schema the model's answer must follow: the intents and the configured names, as enums."""
    services, nodes = _names(config)

    def names(known: list[str]) -> dict[str, object]:
        # An empty enum is no valid schema: with nothing configured the list must stay empty.
        return {"type": "array", "items": {"type": "string", "enum": known}, "maxItems": min(len(known), MAX_NAMES)} \
            if known else {"type": "array", "maxItems": 0}

    return {"type": "object", "additionalProperties": False, "required": ["intent", "services", "nodes"],
            "properties": {"intent": {"type": "string", "enum": [*INTENTS, UNCLEAR]},
                           "services": names(services), "nodes": names(nodes)}}


def instructions(config: BotConfig) -> str:
    """The system message: what each intent answers, the names, and that an order is never one of them."""
    services, nodes = _names(config)
    lines = ["You classify one chat message sent to inferbot, a bot that answers questions about vLLM services "
             "on GPU nodes. Answer only with JSON following the schema.",
             "intent: the question the message asks, one of:"]
    lines += [f"- {name}: {command(name).summary}" for name in INTENTS]
    lines += [f"- {UNCLEAR}: none of these, or the message asks to do something (restart, benchmark, silence, "
              "change a setting): those are never yours to choose.",
              f"services: the services it is about, from: {', '.join(services) or 'none'} (empty: all or none).",
              f"nodes: the nodes it is about, from: {', '.join(nodes) or 'none'} (empty: all or none)."]
    return "\n".join(lines)


def user_text(text: str) -> str:
    """The person's message as the model gets it: at most ``TEXT_MAX`` characters."""
    return text.strip()[:TEXT_MAX]


def validate(content: str, config: BotConfig) -> ModelReading | None:
    """The model's answer checked against the intents and the config: a reading, None for "unclear", or
    :class:`Refused` (garbage, an order or any other intent, a name the config does not know)."""
    try:
        answer = ModelAnswer.model_validate(json.loads(content))
    except (ValueError, ValidationError):
        raise Refused("the answer is not the JSON the schema asks for") from None
    if answer.intent == UNCLEAR:
        return None
    if answer.intent not in INTENTS:
        order = any(c.name == answer.intent and c.confirm for c in COMMANDS)
        raise Refused("the answer is an order, which the model may never choose" if order
                      else "the answer's intent is not one of the questions offered")
    services, nodes = _names(config)
    strangers = [n for n in answer.services if n not in services] + [n for n in answer.nodes if n not in nodes]
    if strangers:
        raise Refused("the answer names a service or node that is not configured")
    return _reading(answer, config)


def _reading(answer: ModelAnswer, config: BotConfig) -> ModelReading:
    """The services and nodes named, as the router gives them: services on the named nodes only; none named →
    every service and node."""
    named_s = list(dict.fromkeys(answer.services))
    named_n = list(dict.fromkeys(answer.nodes))
    if not named_s and not named_n:
        return ModelReading(answer.intent, list(config.services), list(config.nodes), False, [], [])
    on = set(named_n)
    picked: Sequence[Service] = [s for s in config.services if (not named_s or s.name in named_s)
                                 and (not on or s.node in on)]
    wanted = on | {s.node for s in picked}
    return ModelReading(answer.intent, list(picked), [n for n in config.nodes if n.name in wanted], True,
                        named_s, named_n)
