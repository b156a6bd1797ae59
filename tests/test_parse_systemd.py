"""systemctl show parsing: properties in D-Bus order, quoted Environment=, lossy ExecStart=, timestamps."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from services.parse.systemd import (
    parse_environment_property,
    parse_exec_property,
    parse_show,
    parse_show_many,
    parse_timestamp,
)

# samples/units/show-gemma.txt: the recorded shape of `systemctl show vllm-gemma.service -p …` on
# systemd 252, in D-Bus property order (service properties first, unit properties after), not the -p order.
SHOW_GEMMA = (Path(__file__).parent / "samples" / "units" / "show-gemma.txt").read_text()


def test_parse_show_all_properties() -> None:
    u = parse_show(SHOW_GEMMA)
    assert u.id == "vllm-gemma.service"
    assert u.description == "vLLM OpenAI server - Gemma 3 27B"
    assert (u.load_state, u.active_state, u.sub_state, u.result) == ("loaded", "active", "running", "success")
    assert u.main_pid == 65
    assert u.n_restarts == 3
    assert u.exec_main_status == 0
    assert u.need_daemon_reload is True
    assert u.fragment_path == "/etc/systemd/system/vllm-gemma.service"
    assert u.drop_in_paths == [
        "/etc/systemd/system/vllm-gemma.service.d/override.conf",
        "/etc/systemd/system/vllm-gemma.service.d/zz-env.conf",
    ]
    assert u.invocation_id == "5f1c3a0b8e2d4a7f9c6b1e0d2a3f4b5c"
    assert u.exec_start_argv == [
        "/opt/vllm/.venv/bin/vllm", "serve", "google/gemma-3-27b-it", "--host", "0.0.0.0", "--port", "8000",
    ]  # fmt: skip


def test_parse_show_timestamps_pretty_unix_empty() -> None:
    u = parse_show(SHOW_GEMMA)
    expected = datetime(2026, 12, 2, 9, 57, 53, tzinfo=UTC)
    assert u.exec_main_start == expected
    assert u.active_enter == expected
    assert u.state_change == datetime.fromtimestamp(1796205473, UTC)
    assert u.inactive_enter is None
    assert u.exec_main_start is not None and u.exec_main_start.utcoffset() is not None


def test_parse_show_environment_quoting_from_reference() -> None:
    env = parse_show(SHOW_GEMMA).environment
    assert env == {
        "NCCL_DEBUG": "INFO",
        "NCCL_SOCKET_IFNAME": "^docker0,lo",
        "PYTHONPATH": "/opt/vllm plugins/lib",
        "VLLM_API_KEY": "sk-gemma0123456789",
        "EXTRA_NOTE": 'value with "escaped quotes" and $dollar',
        "VLLM_LOGGING_PREFIX": "[vllm-gemma] ",
        "HF_HUB_OFFLINE": "1",
    }


def test_parse_environment_property_backslash_and_later_wins() -> None:
    env = parse_environment_property(r'A=1 "B=c:\\dir" A=2 "C=x\`y"')
    assert env == {"A": "2", "B": r"c:\dir", "C": "x`y"}
    assert parse_environment_property("") == {}


def test_parse_show_environment_files() -> None:
    assert parse_show(SHOW_GEMMA).environment_files == [
        ("/etc/vllm/r1-distill.env", False),
        ("/etc/vllm/r1-distill.local.env", True),
    ]


def test_parse_show_empty_values_and_defaults() -> None:
    text = (
        "MainPID=0\nNRestarts=0\nExecMainStatus=\nExecStart=\nId=vllm-qwen72b.service\nLoadState=loaded\n"
        "ActiveState=inactive\nSubState=dead\nDropInPaths=\nActiveEnterTimestamp=\nNeedDaemonReload=no\n"
        "Environment=\n"
    )
    u = parse_show(text)
    assert u.id == "vllm-qwen72b.service"
    assert (u.active_state, u.sub_state, u.main_pid) == ("inactive", "dead", 0)
    assert u.exec_main_status is None
    assert u.exec_start_argv == []
    assert u.drop_in_paths == []
    assert u.active_enter is None
    assert u.need_daemon_reload is False
    assert u.environment == {}


def test_exec_start_anchors_on_ignore_errors_from_the_right() -> None:
    # The bash script contains " ; " itself: splitting on ";" would cut the command short.
    value = (
        "{ path=/bin/bash ; argv[]=/bin/bash -c sleep 1 ; exec vllm serve m --port 8000 ; ignore_errors=no ; "
        "start_time=[Wed 2026-12-02 09:57:53 UTC] ; stop_time=[n/a] ; pid=70 ; code=(null) ; status=0/0 }"
    )
    assert parse_exec_property(value) == [
        "/bin/bash", "-c", "sleep", "1", ";", "exec", "vllm", "serve", "m", "--port", "8000",
    ]  # fmt: skip


def test_exec_start_ex_form_with_flags() -> None:
    text = (
        "ExecStartEx={ path=/opt/vllm/venv/bin/vllm ; "
        "argv[]=/opt/vllm/venv/bin/vllm serve /models/x --port 8004 ; flags= ; start_time=[n/a] ; "
        "stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\nId=vllm@8004.service\n"
    )
    assert parse_show(text).exec_start_argv == [
        "/opt/vllm/venv/bin/vllm",
        "serve",
        "/models/x",
        "--port",
        "8004",
    ]


def test_exec_start_keeps_json_lossy_and_ignores_later_commands() -> None:
    text = (
        'ExecStart={ path=/v/vllm ; argv[]=/v/vllm serve m --speculative-config {"method": "eagle3"} ; '
        "ignore_errors=no ; start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\n"
        "ExecStart={ path=/bin/true ; argv[]=/bin/true ; ignore_errors=yes ; start_time=[n/a] ; "
        "stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\n"
    )
    argv = parse_show(text).exec_start_argv
    # systemd joined the JSON argument with spaces; it comes back as two words.
    assert argv == ["/v/vllm", "serve", "m", "--speculative-config", '{"method":', '"eagle3"}']


def test_timestamp_non_utc_abbreviation_uses_node_offset() -> None:
    ts = parse_timestamp("Wed 2026-12-02 10:57:53 CET", tz_offset="+0100")
    assert ts == datetime(2026, 12, 2, 9, 57, 53, tzinfo=UTC)
    assert parse_timestamp("Wed 2026-12-02 04:57:53 EST", tz_offset="-0500") == datetime(
        2026, 12, 2, 9, 57, 53, tzinfo=UTC
    )
    # GMT is UTC whatever the node offset says.
    assert parse_timestamp("Wed 2026-12-02 09:57:53 GMT", tz_offset="+0100") == datetime(
        2026, 12, 2, 9, 57, 53, tzinfo=UTC
    )


def test_parse_show_passes_tz_offset() -> None:
    u = parse_show("Id=x.service\nActiveEnterTimestamp=Wed 2026-12-02 11:57:53 EET\n", tz_offset="+0200")
    assert u.active_enter == datetime(2026, 12, 2, 9, 57, 53, tzinfo=UTC)


def test_timestamp_microseconds_and_garbage() -> None:
    assert parse_timestamp("Wed 2026-12-02 09:57:53.250000 UTC") == datetime(
        2026, 12, 2, 9, 57, 53, 250000, tzinfo=UTC
    )
    assert parse_timestamp("n/a") is None
    assert parse_timestamp("yesterday") is None
    assert parse_timestamp("@0.5") == datetime(1970, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)


def test_parse_show_many_blocks() -> None:
    text = (
        "ExecStart={ path=/v/vllm ; argv[]=/v/vllm serve a --port 8000 ; ignore_errors=no ; "
        "start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\nId=vllm-a.service\n\n"
        "Id=vllm-b.service\n\n"
        "ExecStart={ path=/v/vllm ; argv[]=/v/vllm serve c ; ignore_errors=no ; start_time=[n/a] ; "
        "stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }\nId=vllm-c.service\n"
    )
    units = parse_show_many(text)
    assert [u.id for u in units] == ["vllm-a.service", "vllm-b.service", "vllm-c.service"]
    assert units[0].exec_start_argv == ["/v/vllm", "serve", "a", "--port", "8000"]
    assert units[1].exec_start_argv == []
    assert units[2].exec_start_argv == ["/v/vllm", "serve", "c"]
