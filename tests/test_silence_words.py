"""Pure parts of issue 14: routing silences, their reason, the new config keys, leftovers and the diff words
(silencing itself: tests/unit/handlers/test_silence.py)."""

from __future__ import annotations

import pytest

from bot.router import route
from config.loader import ConfigError, parse_config
from config.models import BotConfig
from handlers.restart_diff import applies_text, oom_leftover_sections
from handlers.silence_text import clean_reason, split_silence
from services.leftovers import describe, looks_like_oom, vllm_leftovers
from services.models import GpuProcess, ServiceState

CFG = parse_config("""
[[nodes]]
name = "gpu-a"
host = "h1"
[[services]]
name = "kimi"
node = "gpu-a"
unit = "vllm-kimi.service"
[[services]]
name = "qwen"
node = "gpu-a"
unit = "vllm-qwen.service"
""")


@pytest.mark.parametrize(
    ("text", "intent", "seconds", "reason"),
    [
        ("silence kimi 2h", "silence", 7200.0, ""),
        ("silence kimi 2h planned driver update", "silence", 7200.0, "planned driver update"),
        # The reason's words are not names, and not other commands ("restart", "status", "gpus", "logs").
        ("silence kimi 90 min restart gpus after the status logs are saved", "silence", 5400.0,
         "restart gpus after the status logs are saved"),
        ("<@U0BOT> silence kimi for 1 day because: NCCL upgrade", "silence", 86400.0, "NCCL upgrade"),
        ("please silence kimi 30m", "silence", 1800.0, ""),
        ("mute kimi 1h", "silence", 3600.0, ""),
        ("silence kimi", "silence", None, ""),
        ("unsilence kimi", "unsilence", None, None),
        ("unmute kimi", "unsilence", None, None),
    ],
)
def test_silence_routes_with_duration_and_reason(text: str, intent: str, seconds: float | None,
                                                 reason: str | None) -> None:
    it = route(text, CFG)
    assert it.command.name == intent
    assert it.unknown == [] and it.explicit_target
    assert {f"{s.name}@{s.node}" for s in it.services} == {"kimi@gpu-a"}
    if intent == "silence":
        assert it.args.duration_s == seconds
        assert it.args.reason == reason


def test_silence_of_an_unknown_service_is_named() -> None:
    it = route("silence kimi2 2h planned", CFG)
    assert it.command.name == "silence" and it.unknown == ["kimi2"] and "kimi" in it.suggestions


def test_reason_is_one_line_bounded_redacted_and_pings_nobody() -> None:
    token = "hf_abcdefghijklmnopqrstuvwxyz123456"
    reason = clean_reason(f"  <!channel> @here   swap\nthe token {token} <@U0BOB> " + "x" * 400)
    assert "\n" not in reason and len(reason) <= 200
    assert "<" not in reason and "@here" not in reason and "hf_abcdefghijklmnop" not in reason
    assert reason.startswith("swap the token ")
    assert split_silence("silence kimi") == ("silence kimi", None, "")


def test_reload_command_is_a_validated_fixed_template() -> None:
    cfg = parse_config("[access]\nreload_command='sudo -n /usr/bin/systemctl daemon-reload'\n", "ok.toml")
    assert cfg.access.reload_command == "sudo -n /usr/bin/systemctl daemon-reload"
    assert BotConfig().access.reload_command == "sudo -n systemctl daemon-reload"
    for bad, words in (("systemctl daemon-reload {unit}", "no placeholders"),
                       ("systemctl daemon-reload; reboot", "one plain command"),
                       ("sh -c 'x'", "one plain command"), ("", "one plain command")):
        with pytest.raises(ConfigError, match=words):
            parse_config(f"[access]\nreload_command={bad!r}\n", "bad.toml")


def test_watch_hung_after_and_unhealthy_polls() -> None:
    cfg = parse_config("[watch]\nhung_after='10m'\nunhealthy_polls=3\n", "ok.toml")
    assert cfg.watch.hung_after == 600.0 and cfg.watch.unhealthy_polls == 3
    assert BotConfig().watch.hung_after == 300.0
    with pytest.raises(ConfigError, match="unhealthy_polls"):
        parse_config("[watch]\nunhealthy_polls=0\n", "bad.toml")


def _state(**kw: object) -> ServiceState:
    return ServiceState.model_validate({"service": "kimi", "node": "gpu-a", "unit": "vllm-kimi.service",
                                        "state": "failed", **kw})


def test_leftovers_only_vllm_processes_biggest_first() -> None:
    st = _state(leftovers=[
        GpuProcess(pid=11, name="VLLM::Worker_TP1", memory_mib=1000, gpu_index=1),
        GpuProcess(pid=10, name="VLLM::Worker_TP0", memory_mib=90000, gpu_index=0),
        GpuProcess(pid=12, name="/usr/bin/python3", memory_mib=500, gpu_index=2),
        GpuProcess(pid=13, name="Xorg", memory_mib=300, gpu_index=0),
    ])
    found = vllm_leftovers(st)
    assert [p.pid for p in found] == [10, 11, 12]
    assert describe(found).startswith("PID 10 (VLLM::Worker_TP0) on GPU 0: 90,000 MiB; PID 11 ")
    assert looks_like_oom("ValueError: Free memory on device cuda:0 (1.2/95.6 GiB) on startup is less than desired")
    assert looks_like_oom("torch.OutOfMemoryError: CUDA out of memory.") and not looks_like_oom("exit status 1")
    named = oom_leftover_sections("the load failed: torch.OutOfMemoryError: CUDA out of memory", st)
    assert named and "PID 10" in (named[0].text or "")
    assert oom_leftover_sections("Result=exit-code", _state()) == []


def test_applies_words() -> None:
    assert applies_text(_state(pending_changes=[])) == "no setting changes"
    assert applies_text(_state(pending_changes=["--max-model-len 131072 → 65536", "NCCL_PROTO LL → Simple"])) == \
        "--max-model-len 131072 → 65536; NCCL_PROTO LL → Simple"
    assert applies_text(_state(main_pid=42)).startswith("unknown")
    assert applies_text(_state()).startswith("nothing runs now")
