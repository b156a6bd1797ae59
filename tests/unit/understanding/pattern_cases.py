"""The shared ground of the test_patterns_*.py modules: one config with two services on two nodes, their model
aliases, and how a message is read (intent, services named, whether it is an order, the arguments that matter).
"""

from __future__ import annotations

from bot.router import route
from bot.understanding.markup import read
from bot.understanding.names import service_aliases
from config.loader import parse_config

CFG = parse_config("""
[[nodes]]
name = "gpu-a"
host = "h1"
[[nodes]]
name = "gpu-b"
host = "h2"
[[services]]
name = "kimi"
node = "gpu-a"
unit = "vllm-kimi-k25-int4.service"
[[services]]
name = "qwen"
node = "gpu-b"
unit = "vllm-qwen3.service"
""")
ALIASES = service_aliases(CFG, {("kimi", "gpu-a"): ["kimi-k2.5", "/shared/kimi-k2.5-int4"],
                                ("qwen", "gpu-b"): ["Qwen/Qwen3-32B"]})
BOT = "U0BOT"


def outcome(text: str) -> tuple[str, list[str], bool, dict[str, object]]:
    """How the router reads `text`: the intent (or "unclear"), the services named, whether it is an order, the
    arguments that matter."""
    surface = "slack" if text.startswith("<@") else "terminal"
    r = route(read(text, surface, BOT if surface == "slack" else None), CFG, ALIASES)
    order = r.command.confirm and not r.asked and r.matched
    args = {k: v for k, v in r.args.model_dump().items() if k in ("flag", "env", "value", "force", "negated") and v}
    return (r.intent if r.matched else "unclear"), sorted(r.named_services), order, args


def expect(text: str, intent: str, services: list[str], order: bool = False, **args: object) -> None:
    """Assert that `text` is read as `intent` on `services`, an order or not, with `args` among its arguments."""
    got_intent, got_services, got_order, got_args = outcome(text)
    assert (got_intent, got_services, got_order) == (intent, sorted(services), order), text
    assert all(got_args.get(k) == v for k, v in args.items()), (text, got_args)

