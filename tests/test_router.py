"""The router: the question in many words picks the same intent and the right targets."""

from __future__ import annotations

import pytest

from bot.router import route
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
unit = "vllm-kimi.service"
[[services]]
name = "kimi"
node = "gpu-b"
unit = "vllm-kimi.service"
[[services]]
name = "qwen"
node = "gpu-b"
unit = "vllm-qwen.service"
""")


@pytest.mark.parametrize(
    ("text", "intent", "targets"),
    [
        ("what are current settings?", "settings", None),
        ("What are current settings?", "settings", None),
        ("settings", "settings", None),
        ("show config for kimi", "settings", {"kimi@gpu-a", "kimi@gpu-b"}),
        ("what flags is kimi running with", "settings", {"kimi@gpu-a", "kimi@gpu-b"}),
        ("nccl env on gpu-a", "settings", {"kimi@gpu-a"}),
        ("which model is on gpu-b", "settings", {"kimi@gpu-b", "qwen@gpu-b"}),
        ("<@U0BOT> what are current settings?", "settings", None),
        ("help", "help", None),
        ("status", "status", None),
        ("is kimi up?", "status", {"kimi@gpu-a", "kimi@gpu-b"}),
        ("is it ready yet?", "status", None),
        ("throughput", "throughput", None),
        ("how fast is qwen?", "throughput", {"qwen@gpu-b"}),
        ("tok/s", "throughput", None),
        ("gpu status", "gpus", None),
        ("gpus on gpu-a", "gpus", {"kimi@gpu-a"}),
        ("logs kimi 100", "logs", {"kimi@gpu-a", "kimi@gpu-b"}),
        ("what changed on qwen?", "changes", {"qwen@gpu-b"}),
        ("compare kimi and qwen", "compare", {"kimi@gpu-a", "kimi@gpu-b", "qwen@gpu-b"}),
        ("compare kimi on gpu-a and gpu-b", "compare", {"kimi@gpu-a", "kimi@gpu-b"}),
        ("restart qwen", "restart", {"qwen@gpu-b"}),
        ("audit", "audit", None),
        ("history kimi", "audit", {"kimi@gpu-a", "kimi@gpu-b"}),
    ],
)
def test_intents_and_targets(text: str, intent: str, targets: set[str] | None) -> None:
    i = route(text, CFG)
    assert i.command.name == intent
    got = {f"{s.name}@{s.node}" for s in i.services}
    if targets is None:
        assert not i.explicit_target and got == {"kimi@gpu-a", "kimi@gpu-b", "qwen@gpu-b"}
    else:
        assert i.explicit_target and got == targets


def test_focus_and_numbers() -> None:
    assert route("nccl env on gpu-a", CFG).args["focus"] == "nccl"
    assert route("which model is on gpu-a", CFG).args["focus"] == "model"
    assert route("logs kimi 100", CFG).args["lines"] == 100
    assert route("restart kimi force", CFG).args["force"] is True


def test_unknown_service_gets_did_you_mean() -> None:
    i = route("show config for kimmi", CFG)
    assert i.unknown == ["kimmi"] and "kimi" in i.suggestions


def test_garbage_and_huge_messages_route_to_help() -> None:
    for text in ["", "   ", "asdf qwer", "🤖🤖🤖", "\x00\x01", "x" * 100_000, "<script>alert(1)</script>"]:
        i = route(text, CFG)
        assert i.command.name == "help" and not i.matched


def test_typo_in_command_suggests_keyword() -> None:
    i = route("thruput", CFG)
    assert not i.matched and i.command.name == "help"
    i = route("settngs", CFG)
    assert "settings" in i.suggestions
