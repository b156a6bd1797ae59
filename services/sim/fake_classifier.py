"""The simulated vLLM's answer to a chat completion that asks for structured output (``response_format``
``json_schema``): a tiny, deterministic keyword classifier standing in for a model.

It knows nothing of inferbot's understanding code (tests need an independent truth): it reads the schema it is
given — an object whose ``intent`` is a string enum and whose other properties are arrays of string enums — and
fills it from the last user message: the first intent of its own short keyword table that the schema offers,
else ``unclear`` (or the enum's last value), and every enum value of the arrays written in the message.
"""

from __future__ import annotations

import json
import re
from typing import Any

# A model's everyday reading of words, first match wins (its own table; not the bot's vocabulary).
KEYWORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gpus", ("gpu", "gpus", "vram", "temperature", "temperatures", "toasty", "hot", "watts", "fans", "cards")),
    ("logs", ("log", "logs", "journal", "traceback", "stacktrace", "complaining", "spewing")),
    ("throughput", ("tokens", "speed", "snappy", "sluggish", "latency", "qps", "crunching")),
    ("settings", ("config", "configured", "flags", "knobs", "launched", "arguments")),
    ("restarts", ("restart", "restarted", "reboot", "rebooted", "bounce", "bounced")),
    ("status", ("alive", "healthy", "breathing", "vibe", "vibes", "holding")),
)


def _enum(prop: Any) -> list[str]:
    if not isinstance(prop, dict):
        return []
    if isinstance(prop.get("enum"), list):
        return [str(v) for v in prop["enum"]]
    return _enum(prop.get("items"))


def classify(schema: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    """The JSON text a model constrained by ``schema`` would answer to the last user message."""
    text = next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "").lower()
    words = set(re.findall(r"[a-z0-9][a-z0-9.-]*[a-z0-9]|[a-z0-9]", text))
    found = schema.get("properties")
    props: dict[str, Any] = found if isinstance(found, dict) else {}
    answer: dict[str, Any] = {}
    for key, prop in props.items():
        offered = _enum(prop)
        if isinstance(prop, dict) and prop.get("type") == "array":
            answer[key] = [v for v in offered if v.lower() in words]
            continue
        chosen = next((intent for intent, keys in KEYWORDS if intent in offered and words & set(keys)), None)
        answer[key] = chosen or ("unclear" if "unclear" in offered else (offered[-1] if offered else ""))
    return json.dumps(answer)
