"""The router: the question in many words picks the same intent and the right targets."""

from __future__ import annotations

import pytest

from bot.router import route
from config.loader import parse_config
from handlers import settings

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
        ("unlock qwen", "unlock", {"qwen@gpu-b"}),
        ("clear the restart lock on qwen", "unlock", {"qwen@gpu-b"}),
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
    assert route("nccl env on gpu-a", CFG).args.focus == "nccl"
    assert route("which model is on gpu-a", CFG).args.focus == "model"
    assert route("logs kimi 100", CFG).args.lines == 100
    assert route("restart kimi force", CFG).args.force is True


def test_unknown_service_gets_did_you_mean() -> None:
    i = route("show config for kimi2", CFG)
    assert i.unknown == ["kimi2"] and "kimi" in i.suggestions


def test_a_misspelt_name_is_that_name_but_another_name_is_not_a_typo() -> None:
    """Issue 23, point 4: spelling tolerance for names — never across a digit or a short part."""
    for text in ("show config for kimmi", "logs kimmi", "what changed on qwne", "qwne status"):
        i = route(text, CFG)
        assert i.unknown == [] and i.explicit_target, text
    assert route("status gpu-c", CFG).unknown == ["gpu-c"]  # another node, not a typo of gpu-a
    assert route("throughput for qwen9", CFG).unknown == ["qwen9"]  # another model, not qwen
    assert route("asdf qwer", CFG).unknown == []  # "qwer" is no name: one letter of four changed


def test_garbage_and_huge_messages_route_to_short_help() -> None:
    for text in ["", "   ", "asdf qwer", "\x00\x01", "x" * 100_000, "<script>alert(1)</script>"]:
        i = route(text, CFG)
        assert i.command.name == "help" and not i.matched, text
    assert route("🤖🤖🤖", CFG).command.name == "smalltalk"  # emoji get one line back, not the help


def test_typos_of_command_words_are_acted_on() -> None:
    """Issue 23: "the help names the word but does not act on it" — now it acts (4+ letters, one edit)."""
    for text, intent in (("thruput", "throughput"), ("settngs", "settings"), ("stauts", "status"),
                         ("lgos kimi", "logs"), ("settigns kimi", "settings"), ("thoughput kimi", "throughput")):
        i = route(text, CFG)
        assert i.matched and i.command.name == intent, text


# -- issue 10: questions and negations about restarts never start one ------------------------------------

RESTART_QUESTIONS = [
    "why did kimi restart last night?", "when was the last restart of kimi", "who can restart kimi?",
    "did kimi restart overnight", "how do I restart kimi", "should I restart kimi?", "restart history",
    "has kimi restarted", "kimi restarted?", "restarts of kimi today", "can I restart kimi?",
    "was qwen rebooted?", "how often does kimi restart", "what restarted kimi", "is it safe to restart kimi",
    "who may bounce qwen", "last restart of qwen", "restart log for kimi", "why was kimi bounced",
    "hey, why did kimi restart?", "kimi keeps restarting",
]
RESTART_NEGATIONS = ["don't restart kimi", "never restart kimi", "do not restart kimi", "dont restart kimi",
                     "please don't restart kimi", "stop restarting kimi", "kimi must not be restarted",
                     "no need to restart qwen", "don't bounce qwen"]
RESTART_REQUESTS = ["restart kimi", "please restart kimi on gpu-a", "/inferbot restart kimi", "restart kimi force",
                    "bounce kimi", "can you restart kimi?", "could you please restart qwen", "pls restart qwen",
                    "reboot qwen", "Restart kimi.", "<@U0BOT> restart qwen", "ok, restart qwen"]


@pytest.mark.parametrize("text", RESTART_QUESTIONS + RESTART_NEGATIONS)
def test_questions_and_negations_about_restarts_do_not_route_to_restart(text: str) -> None:
    i = route(text, CFG)
    assert i.command.name == "restarts" and not i.command.confirm and not i.command.restricted
    assert not i.unknown, i.unknown


@pytest.mark.parametrize("text", RESTART_NEGATIONS)
def test_negations_are_marked(text: str) -> None:
    assert route(text, CFG).args.negated is True


@pytest.mark.parametrize("text", RESTART_QUESTIONS)
def test_questions_are_not_negations(text: str) -> None:
    assert route(text, CFG).args.negated is False


@pytest.mark.parametrize("text", RESTART_REQUESTS)
def test_only_imperatives_route_to_restart(text: str) -> None:
    i = route(text, CFG)
    assert i.command.name == "restart" and i.command.confirm and not i.unknown


def test_restart_questions_name_their_target() -> None:
    i = route("why did qwen restart last night?", CFG)
    assert i.explicit_target and {f"{s.name}@{s.node}" for s in i.services} == {"qwen@gpu-b"}


# -- unknown names are reported after every word ----------------------------------------------------------

@pytest.mark.parametrize(
    ("text", "unknown", "suggestion"),
    [
        ("status gpu-c", "gpu-c", "gpu-a"), ("gpus gpu-c", "gpu-c", "gpu-a"), ("settings kimi2", "kimi2", "kimi"),
        ("is gpu-c up?", "gpu-c", "gpu-a"), ("logs kimi2", "kimi2", "kimi"),
        ("throughput for qwen9", "qwen9", "qwen"), ("compare kimi2 and qwen", "kimi2", "kimi"),
        ("show config for kimi2", "kimi2", "kimi"), ("what changed on qwen2", "qwen2", "qwen"),
        ("history kimi2", "kimi2", "kimi"), ("restart kimi2", "kimi2", "kimi"),
        ("why did kimi2 restart?", "kimi2", "kimi"), ("tok/s of qwen9", "qwen9", "qwen"),
        ("gpu utilization on gpu-c", "gpu-c", "gpu-a"), ("what's --max-model-len on kimi2", "kimi2", "kimi"),
    ],
)
def test_unknown_target_after_any_word(text: str, unknown: str, suggestion: str) -> None:
    i = route(text, CFG)
    assert i.matched and unknown in i.unknown and suggestion in i.suggestions


@pytest.mark.parametrize(
    "text",
    ["what are current settings?", "is it ready yet?", "how fast is kimi?", "what flags is kimi running with",
     "which model is on gpu-a", "show me the logs for kimi", "is kimi healthy", "what changed on kimi since yesterday",
     "how long until kimi is ready", "what is the eta for kimi", "show nccl env for kimi on gpu-b",
     "logs kimi 100", "logs kimi 10m", "throughput for qwen in the last 5 minutes", "restart kimi force",
     "what's the kv cache usage on kimi", "is kimi up?", "gpus on gpu-a", "what is -tp of kimi",
     "what is the p99 latency of kimi", "is kimi running fp8", "how hot are the gpus on gpu-a",
     "which vllm version, 0.20.1?", "is it safe to restart kimi"],
)
def test_ordinary_words_are_not_unknown_targets(text: str) -> None:
    assert route(text, CFG).unknown == []


def test_every_example_in_the_table_routes_to_its_command() -> None:
    from handlers.commands import COMMANDS

    for c in COMMANDS:
        for example in c.examples:
            i = route(example, CFG)
            assert (i.command.name, i.unknown) == (c.name, []), example


def test_served_model_name_model_path_and_unit_pick_their_service() -> None:
    from bot.router import service_aliases

    aliases = service_aliases(CFG, {("qwen", "gpu-b"): ["qwen3-32b", "/models/Qwen3-32B"]})
    for text in ("settings for qwen3-32b", "settings for /models/Qwen3-32B", "settings for Qwen3-32B",
                 "status of vllm-qwen.service", "logs vllm-qwen"):
        i = route(text, CFG, aliases)
        assert i.unknown == [] and {f"{s.name}@{s.node}" for s in i.services} == {"qwen@gpu-b"}, text
    # Without the alias (nothing seen yet), the name is unknown rather than ignored.
    assert route("settings for qwen3-32b", CFG).unknown == ["qwen3-32b"]


# -- GPU utilisation is the GPUs answer; a flag name is the settings answer focused on it -----------------

@pytest.mark.parametrize("text", ["gpu utilization", "what's the gpu utilization on gpu-a", "GPU util", "gpu usage",
                                  "vram", "gpu memory", "GPU utilisation", "how much vram is used on gpu-b",
                                  "gpu mem"])
def test_gpu_utilisation_routes_to_gpus(text: str) -> None:
    i = route(text, CFG)
    assert i.command.name == "gpus" and i.unknown == []


@pytest.mark.parametrize(
    ("text", "flag"),
    [("what is the gpu-memory-utilization of kimi", "gpu-memory-utilization"),
     ("what's --max-model-len on kimi", "max-model-len"), ("tensor parallel size of kimi", "tensor-parallel-size"),
     ("gpu memory utilization of kimi", "gpu-memory-utilization"), ("-tp of kimi", "tensor-parallel-size"),
     ("what is max_num_seqs on qwen", "max-num-seqs"), ("--enforce-eager on qwen?", "enforce-eager"),
     ("which tool call parser does kimi use", "tool-call-parser"), ("quantization of kimi", "quantization")],
)
def test_flag_questions_focus_on_the_flag(text: str, flag: str) -> None:
    i = route(text, CFG)
    assert i.command.handler is settings.handle
    assert i.args.focus == "flag" and i.args.flag == flag and i.unknown == []


def test_a_unit_shared_by_a_whole_fleet_picks_every_service_once() -> None:
    """512 nodes running the same unit: the unit's name targets each service once, and each node once.

    (The aliases were deduplicated by comparing whole models, quadratic in the fleet: 0.25 s per question.)
    """
    fleet = parse_config("".join(
        f'[[nodes]]\nname = "n{i:03d}"\nhost = "h{i}"\n[[services]]\nname = "kimi"\nnode = "n{i:03d}"\n'
        'unit = "vllm-kimi.service"\n' for i in range(512)))
    i = route("status of vllm-kimi.service and kimi on n007", fleet)
    assert [f"{s.name}@{s.node}" for s in i.services] == ["kimi@n007"]
    i = route("status of vllm-kimi and vllm-kimi.service", fleet)
    assert [s.node for s in i.services] == [f"n{k:03d}" for k in range(512)]
    assert [n.name for n in i.nodes] == [f"n{k:03d}" for k in range(512)] and i.explicit_target
