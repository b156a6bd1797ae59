"""journalctl ``-o json`` entries and the events read from them, on output recorded from a real systemd 252.

``samples/journal/real-systemd-252.jsonl`` is what ``journalctl -u vx.service -a -o json --output-fields=
MESSAGE,_SYSTEMD_UNIT,UNIT,_SYSTEMD_INVOCATION_ID,INVOCATION_ID,_PID`` printed in the real-systemd tier's
container (a stand-in vLLM whose first line carries a carriage return, then ``systemctl kill -s KILL``,
``Restart=on-failure`` with ``RestartSec=3``, ``systemctl stop``, ``systemctl start``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from services.parse.journal import GREP, parse_entry, valid_cursor

SAMPLE = Path(__file__).parent / "samples" / "journal" / "real-systemd-252.jsonl"
LINES = SAMPLE.read_bytes().splitlines()
UNITS = frozenset({"vx.service"})


def entries() -> list[tuple[bool, str | None, str]]:
    out = []
    for line in LINES:
        e = parse_entry(line, UNITS)
        assert e is not None, line
        out.append((e.by_systemd, e.event, e.message))
    return out


def test_every_recorded_entry_is_read_with_its_unit_cursor_and_time() -> None:
    seen = [parse_entry(line, UNITS) for line in LINES]
    assert all(e is not None and e.unit == "vx.service" and valid_cursor(e.cursor) for e in seen)
    times = [e.realtime_us for e in seen if e is not None]
    assert times == sorted(times) and times[0] > 1_700_000_000_000_000
    cursors = [e.cursor for e in seen if e is not None]
    assert len(set(cursors)) == len(cursors)


def test_the_service_managers_lines_and_the_units_own() -> None:
    got = entries()
    by_systemd = [(event, msg) for sd, event, msg in got if sd]
    assert ("main_exited", "vx.service: Main process exited, code=killed, status=9/KILL") in by_systemd
    assert ("unit_changed", "vx.service: Failed with result 'signal'.") in by_systemd
    assert ("unit_changed", "vx.service: Scheduled restart job, restart counter is at 1.") in by_systemd
    assert ("unit_changed", "vx.service: Deactivated successfully.") in by_systemd
    assert [msg for event, msg in by_systemd if msg.startswith("Started ")] == ["Started vx.service - vLLM x."] * 3
    assert all(event == "unit_changed" for event, msg in by_systemd if msg.startswith(("Started", "Stop")))
    # systemd's own note about the signal is not a state change.
    assert (None, "vx.service: Sent signal SIGKILL to main process 34 (python3) on client request.") in by_systemd
    own = [(event, msg) for sd, event, msg in got if not sd]
    assert [event for event, msg in own if event] == ["ready"] * 3
    assert all(msg.endswith("Application startup complete.") for event, msg in own if event == "ready")
    # uvicorn's "Started server process" is the unit's own line: not systemd's "Started".
    assert all(event is None for event, msg in own if "Started server process" in msg)


def test_a_message_with_a_carriage_return_comes_as_bytes_and_is_read_whole() -> None:
    raw = [json.loads(line)["MESSAGE"] for line in LINES]
    assert len([m for m in raw if isinstance(m, list)]) == 3
    msgs = [msg for _sd, _event, msg in entries() if msg.startswith("Loading safetensors")]
    assert msgs and all("\r" in m and m.endswith("2/4 [00:01<00:01, 2.0s/it]") for m in msgs)


def test_the_run_each_line_belongs_to() -> None:
    runs = [parse_entry(line, UNITS) for line in LINES]
    starts = [e.invocation for e in runs if e is not None and e.message.startswith("Started ")]
    assert len(set(starts)) == 3 and all(re.fullmatch(r"[0-9a-f]{32}", s) for s in starts)
    ready = [e.invocation for e in runs if e is not None and e.event == "ready"]
    assert ready == starts  # the unit's own line and PID 1's line name the same run


def test_other_units_and_garbage_are_not_entries() -> None:
    assert all(parse_entry(line, frozenset({"other.service"})) is None for line in LINES)
    assert parse_entry(b"", UNITS) is None
    assert parse_entry(b'{"MESSAGE": "x"}', UNITS) is None  # no cursor
    assert parse_entry(b"-- No entries --", UNITS) is None
    assert parse_entry(b'[1, 2]', UNITS) is None
    forged = json.loads(LINES[0])
    forged["__CURSOR"] = "s=1;i=2'; rm -rf /"
    assert parse_entry(json.dumps(forged), UNITS) is None
    # A line the unit writes that mimics PID 1 is still the unit's own (no _PID=1).
    fake = {"__CURSOR": "s=1;i=2", "__REALTIME_TIMESTAMP": "1", "_SYSTEMD_UNIT": "vx.service", "_PID": "34",
            "UNIT": "vx.service", "MESSAGE": "vx.service: Main process exited, code=exited, status=1/FAILURE"}
    e = parse_entry(json.dumps(fake), UNITS)
    assert e is not None and not e.by_systemd and e.event is None


def test_the_grep_pattern_lets_through_every_line_an_event_is_read_from() -> None:
    grep = re.compile(GREP)
    for _sd, event, msg in entries():
        if event is not None:
            assert grep.search(msg), msg
    # ...and keeps back what the node would otherwise send all day.
    assert not grep.search("(APIServer pid=1) INFO:     127.0.0.1:50234 - \"POST /v1/chat/completions HTTP/1.1\" 200")
    assert not grep.search("(APIServer pid=1) INFO 05-19 10:13:11 [loggers.py:271] Engine 000: Avg prompt "
                           "throughput: 0.0 tokens/s, Avg generation throughput: 1055.3 tokens/s")
    assert grep.search("(EngineCore_DP0 pid=2) ERROR 05-19 10:13:11 [core.py:1] engine core proc died")
    assert "'" not in GREP  # it travels in single quotes
