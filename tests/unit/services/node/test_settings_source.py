"""services/node/settings_source.py: where the recorded Kimi unit's settings are read from, and the fallbacks
when the process cannot be read (the recording's command line, log line and API answers are the truth)."""

from __future__ import annotations

from services.models import Warnings
from services.node import parse_cache
from services.node.api_facts import api_facts
from services.node.probe import ProcRow, ReadFile, UnitRaw
from services.node.settings_source import Settings, read_settings
from tests.unit.services.node.recorded import KIMI_MAIN_PID, unit

READY = unit("settings-ready")


def settings(u: UnitRaw) -> tuple[Settings, Warnings]:
    show, warnings = parse_cache.show(u, "+0000"), Warnings()
    argv = parse_cache.declared_argv(u, parse_cache.unit_file(u), show, {})
    return read_settings(u, show, argv, api_facts(u), warnings), warnings


def test_the_main_process_is_the_server() -> None:
    s, warnings = settings(READY)
    assert (s.source, s.pid, s.note) == ("process", KIMI_MAIN_PID, None)
    assert s.running is not None and s.running.model == "/shared/kimi-k2.5-int4"
    assert s.running.flags["tensor-parallel-size"] == "8" and s.running.flags["max-model-len"] == "131072"
    assert s.cmd is s.running and s.process_env is not None and s.process_env["NCCL_ALGO"] == "Ring"
    assert s.log_cmd is not None and s.log_cmd.flags["tensor-parallel-size"] == "8"  # its non-default args line
    assert warnings.items == [] and s.tried == []


def test_an_unreadable_environment_is_a_warning_of_its_kind() -> None:
    u = READY.model_copy(update={"environ": ReadFile(path=f"/proc/{KIMI_MAIN_PID}/environ", rc=1, data=None)})
    s, warnings = settings(u)
    assert s.process_env is None
    assert [w.kind for w in warnings.items] == ["environ-denied"]
    assert f"/proc/{KIMI_MAIN_PID}/environ" in warnings.items[0].text


def test_a_forking_wrapper_hands_over_to_its_child() -> None:
    main = ReadFile(path=f"/proc/{KIMI_MAIN_PID}/cmdline", rc=0, data=b"sudo\0-u\0vllm\0/opt/run-kimi.sh\0")
    child = ProcRow(pid=23901, ppid=KIMI_MAIN_PID, comm="vllm",
                    argv=["/opt/vllm/bin/vllm", "serve", "/shared/kimi-k2.5-int4", "-tp", "8"])
    s, _ = settings(READY.model_copy(update={"cmdline": main, "procs": [*READY.procs, child]}))
    assert (s.source, s.pid) == ("cgroup-process", 23901)
    assert s.running is not None and s.running.flags.get("tensor-parallel-size") == "8"
    assert s.argv == child.argv and s.note is not None
    assert s.note.startswith("settings from PID 23901 (/opt/vllm/bin/vllm serve /shared/kimi-k2.5-int4 -tp 8), a "
                             f"child of the main process: the main process (PID {KIMI_MAIN_PID}, sudo -u vllm ")


def test_without_a_readable_command_line_the_log_line_speaks() -> None:
    hidden = ReadFile(path=f"/proc/{KIMI_MAIN_PID}/cmdline", rc=1, data=None)
    s, warnings = settings(READY.model_copy(update={"cmdline": hidden, "procs": []}))
    assert s.source == "vllm-log" and s.running is s.log_cmd and s.running is not None
    assert s.running.flags["max-model-len"] == "131072"
    assert s.note is not None and "non-default args" in s.note
    assert any("not readable, and sudo -n refused" in t for t in s.tried)
    assert warnings.items == []


def test_without_process_or_log_the_unit_file_or_only_the_api() -> None:
    hidden = ReadFile(path=f"/proc/{KIMI_MAIN_PID}/cmdline", rc=1, data=None)
    s, warnings = settings(READY.model_copy(update={"cmdline": hidden, "procs": [], "vargs": None}))
    assert s.source == "unit" and s.cmd is s.declared and s.cmd is not None  # the unit runs vllm serve itself
    assert s.cmd.flags["max-model-len"] == "131072"
    assert [w.text for w in warnings.items] == [
        f"could not read /proc/{KIMI_MAIN_PID}/cmdline — settings are from the unit file"]
    s, _ = settings(READY.model_copy(update={"cmdline": hidden, "procs": [], "vargs": None, "cat": "", "cat_rc": 1,
                                             "show": READY.show.replace("ExecStart=", "X=")}))
    assert s.source == "api" and s.cmd is None  # /health and /version answered; nothing else was readable
    assert s.tried and s.note is not None and s.note.startswith("only vLLM's API could be read")
