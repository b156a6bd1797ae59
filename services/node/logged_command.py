"""vLLM's start-up line ``non-default args: {…}`` read as a command, and the secrets it holds."""

from __future__ import annotations

import json

from services.models import FlagValue, VllmCommand
from services.redact import is_secret_name

_LOG_SKIP = frozenset({"model", "model_tag", "config", "subparser", "dispatch_function"})


def log_command(args: dict[str, object]) -> VllmCommand:
    """vLLM's ``non-default args`` as a command: argparse dests back to long flag names."""
    model = args.get("model") or args.get("model_tag")
    flags: dict[str, FlagValue] = {}
    for key, value in args.items():
        if key in _LOG_SKIP or value is None:
            continue
        flags[key.replace("_", "-")] = _py_flag(value)
    return VllmCommand(wrapper="unknown", model=str(model) if model else None, flags=flags)


def _py_flag(value: object) -> FlagValue:
    if isinstance(value, bool):
        return value
    if isinstance(value, list | tuple):
        return [json.dumps(v) if isinstance(v, dict | list) else str(v) for v in value]
    if isinstance(value, dict):
        return json.dumps(value)
    return str(value)


def nested_secrets(value: object, name: str = "") -> list[str]:
    """Values under a secret-named key at any depth of the logged arguments (a connector's ``api_key``)."""
    if isinstance(value, dict):
        return [v for k, x in value.items() for v in nested_secrets(x, str(k))]
    if isinstance(value, list | tuple):
        return [v for x in value for v in nested_secrets(x, name)]
    if name and is_secret_name(name) and not isinstance(value, bool) and value is not None:
        return [str(value)]
    return []
