"""Full commands people can type (and press, in Slack): what the bot offers when it suggests or asks back."""

from __future__ import annotations

from collections.abc import Sequence

from config.models import Node, Service
from handlers.context import Args

_COMMAND_TEXT = {"settings": "settings", "status": "status", "throughput": "throughput", "gpus": "gpus",
                 "logs": "logs", "audit": "history", "restart": "restart", "bench": "bench",
                 "unsilence": "unsilence", "unlock": "unlock", "help": "help", "chart_throughput": "chart throughput",
                 "chart_loads": "chart loads", "chart_bench": "chart bench", "smalltalk": "help"}


def command_text(name: str, services: Sequence[Service], nodes: Sequence[Node], args: Args | None = None,
                 explicit: bool = True) -> str:
    """A full command that asks for ``name`` about these targets ("status kimi", "compare kimi and qwen")."""
    names = list(dict.fromkeys(s.name for s in services)) if explicit else []
    node_names = [n.name for n in nodes] if explicit and not names else []
    who = " ".join(names or node_names)
    a = args or Args()
    if name == "compare":
        pair = names or node_names
        return "compare " + " and ".join(pair[:2]) if len(pair) >= 2 else "compare"
    if name == "flag":
        what = a.env if a.env else f"--{a.flag}" if a.flag else "--max-model-len"
        return f"{what} of {who}" if who else what
    if name == "silence":
        return f"silence {who} 1h" if who else "silence"
    if name == "changes":
        return f"what changed on {who}" if who else "what changed"
    if name == "restarts":
        return f"restart history {who}".strip()
    return f"{_COMMAND_TEXT.get(name, name)} {who}".strip()
