"""Parsers for ``systemctl show`` output and the service manager's journal lines (pure functions, no I/O).

``systemctl show`` prints ``Name=value`` lines in D-Bus property order, not in ``-p`` order, so every
parser here keys on the name and never on the position of a line.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Literal

from services.models import UnitShow

_PRETTY_TS = re.compile(
    r"^(?:[A-Za-z]{3} )?(?P<date>\d{4}-\d{2}-\d{2}) (?P<time>\d{2}:\d{2}:\d{2})(?:\.(?P<frac>\d{1,6}))?"
    r"(?: (?P<tz>\S+))?$"
)
_OFFSET = re.compile(r"^(?P<sign>[+-])(?P<h>\d{2}):?(?P<m>\d{2})$")
_UTC_NAMES = frozenset({"UTC", "GMT", "UCT", "Z", "ZULU", "UNIVERSAL"})
_ENV_FILE_LINE = re.compile(r"^(?P<path>.*?) \(ignore_errors=(?P<ign>yes|no)\)$")
# The fields systemd prints after argv[] in an ExecStart= record; anchoring on the rightmost one keeps an
# argv that itself contains " ; " intact.
_EXEC_ANCHORS = (" ; ignore_errors=", " ; flags=")
_ARGV_MARK = " ; argv[]="


def parse_offset(tz_offset: str) -> timezone:
    """A fixed ``timezone`` from a ``date +%z`` string (``+0100``, ``-05:30``); UTC when unreadable."""
    m = _OFFSET.match(tz_offset.strip())
    if not m:
        return UTC
    delta = timedelta(hours=int(m["h"]), minutes=int(m["m"]))
    return timezone(-delta if m["sign"] == "-" else delta)


def parse_timestamp(value: str, *, tz_offset: str = "+0000") -> datetime | None:
    """A systemd timestamp (``Wed 2026-12-02 09:57:53 UTC``, ``@1796205473`` or empty) as aware UTC.

    Abbreviations other than UTC/GMT are ambiguous (``CET``, ``IST``…), so the node's own ``date +%z``
    offset is applied to them instead of guessing.
    """
    value = value.strip()
    if not value or value in {"n/a", "0"}:
        return None
    if value.startswith("@"):
        try:
            return datetime.fromtimestamp(float(value[1:]), UTC)
        except (ValueError, OverflowError):
            return None
    m = _PRETTY_TS.match(value)
    if not m:
        return None
    try:
        naive = datetime.strptime(f"{m['date']} {m['time']}", "%Y-%m-%d %H:%M:%S")
    except ValueError:
        return None
    if m["frac"]:
        naive = naive.replace(microsecond=int(m["frac"].ljust(6, "0")))
    tz_name = m["tz"] or ""
    if tz_name.upper() in _UTC_NAMES:
        tz = UTC
    elif _OFFSET.match(tz_name):
        tz = parse_offset(tz_name)
    else:
        tz = parse_offset(tz_offset)
    return naive.replace(tzinfo=tz).astimezone(UTC)


def parse_environment_property(value: str) -> dict[str, str]:
    """The ``Environment=`` property (``A=1 "B=x y" "C=\\$HOME"``) as a dict, later entries winning.

    systemd writes each entry with ``shell_maybe_quote``: bare when harmless, otherwise wrapped in double
    quotes with ``"`` ``\\`` `` ` `` ``$`` backslash-escaped. shlex would also interpret other escapes and
    single quotes, which systemd never emits here, so this is a small hand-written reader.
    """
    env: dict[str, str] = {}
    for entry in _split_maybe_quoted(value):
        name, eq, val = entry.partition("=")
        if eq and name:
            env[name] = val
    return env


def _split_maybe_quoted(value: str) -> list[str]:
    words: list[str] = []
    buf: list[str] = []
    in_word = False
    quote = False
    i = 0
    while i < len(value):
        c = value[i]
        if quote:
            if c == "\\" and i + 1 < len(value):
                buf.append(value[i + 1])
                i += 2
                continue
            if c == '"':
                quote = False
            else:
                buf.append(c)
        elif c == '"':
            quote = True
            in_word = True
        elif c in " \t\n":
            if in_word:
                words.append("".join(buf))
                buf = []
                in_word = False
        else:
            buf.append(c)
            in_word = True
        i += 1
    if in_word:
        words.append("".join(buf))
    return words


def parse_exec_property(value: str) -> list[str]:
    """argv from an ``ExecStart=``/``ExecStartEx=`` record ``{ path=… ; argv[]=… ; ignore_errors=… ; … }``.

    systemd joins argv with single spaces and no quoting, so the result is lossy: an argument that
    contained spaces comes back as several words. Use ``/proc/PID/cmdline`` or ``systemctl cat`` when the
    exact argv matters.
    """
    value = value.strip()
    if not value.startswith("{"):
        return []
    start = value.find(_ARGV_MARK)
    if start < 0:
        return []
    start += len(_ARGV_MARK)
    end = max(value.rfind(anchor) for anchor in _EXEC_ANCHORS)
    if end < start:
        # No anchor: take the record up to its closing brace rather than lose the command.
        end = value.rfind(" }") if value.endswith("}") else len(value)
        if end < start:
            return []
    return [w for w in value[start:end].split(" ") if w]


def parse_show(text: str, *, tz_offset: str = "+0000") -> UnitShow:
    """Parse ``systemctl show UNIT -p …`` output (``Name=value`` lines, any order) into a ``UnitShow``."""
    props: dict[str, str] = {}
    env_files: list[tuple[str, bool]] = []
    exec_start: list[str] | None = None
    exec_start_ex: list[str] | None = None
    for raw in text.splitlines():
        name, eq, value = raw.partition("=")
        if not eq:
            continue
        name = name.strip()
        if name == "EnvironmentFiles":
            m = _ENV_FILE_LINE.match(value.strip())
            if m:
                env_files.append((m["path"], m["ign"] == "yes"))
            elif value.strip():
                env_files.append((value.strip(), False))
        elif name == "ExecStart":
            # Type=oneshot units print one line per command; the first is the one that matters here.
            if exec_start is None:
                exec_start = parse_exec_property(value)
        elif name == "ExecStartEx":
            if exec_start_ex is None:
                exec_start_ex = parse_exec_property(value)
        else:
            props[name] = value

    def ts(key: str) -> datetime | None:
        return parse_timestamp(props.get(key, ""), tz_offset=tz_offset)

    return UnitShow(
        id=props.get("Id", ""),
        description=props.get("Description", ""),
        load_state=props.get("LoadState", ""),
        active_state=props.get("ActiveState", ""),
        sub_state=props.get("SubState", ""),
        result=props.get("Result", ""),
        main_pid=_int(props.get("MainPID")) or 0,
        exec_main_start=ts("ExecMainStartTimestamp"),
        active_enter=ts("ActiveEnterTimestamp"),
        state_change=ts("StateChangeTimestamp"),
        inactive_enter=ts("InactiveEnterTimestamp"),
        n_restarts=_int(props.get("NRestarts")) or 0,
        need_daemon_reload=props.get("NeedDaemonReload", "").strip() == "yes",
        fragment_path=props.get("FragmentPath", "").strip(),
        drop_in_paths=props.get("DropInPaths", "").split(),
        environment=parse_environment_property(props.get("Environment", "")),
        environment_files=env_files,
        exec_start_argv=exec_start or exec_start_ex or [],
        exec_main_status=_int(props.get("ExecMainStatus")),
        invocation_id=props.get("InvocationID", "").strip(),
    )


def parse_show_many(text: str, *, tz_offset: str = "+0000") -> list[UnitShow]:
    """Parse ``systemctl show -p … A B C`` output: one block per unit, blocks separated by blank lines."""
    blocks: list[list[str]] = [[]]
    for line in text.splitlines():
        if line.strip():
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    return [parse_show("\n".join(b), tz_offset=tz_offset) for b in blocks if b]


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


# --- the service manager's journal lines about a unit -----------------------------------------------

UnitLine = Literal["main_exited", "unit_changed"]
UNIT_LINES: list[tuple[UnitLine, re.Pattern[str]]] = [
    # `vllm-kimi.service: Main process exited, code=killed, status=9/KILL`; systemd logs a clean exit
    # (status=0/SUCCESS) at debug level only: `Deactivated successfully.` says it.
    ("main_exited", re.compile(r"Main process exited, code=")),
    # Every change of the unit's state has a line: `Started vllm-kimi.service - vLLM Kimi.` (252; older:
    # `Started vLLM Kimi.`), `Stopping …`, `vllm-kimi.service: Failed with result 'exit-code'.`, `…: Scheduled
    # restart job, restart counter is at 2.`, `…: Deactivated successfully.`, `…: Start request repeated too
    # quickly.`, and the ExecStartPre/ExecReload side (`Control process exited, code=…`, `Reloading …`).
    ("unit_changed", re.compile(
        r"^(?:Started|Stopped|Starting|Stopping|Reloading|Reloaded|Failed to start) "
        r"|Failed with result |Deactivated successfully\.|Scheduled restart job|Start request repeated too quickly"
        r"|Control process exited, code=")),
]
"""What a line of the service manager (PID 1) about a unit says, for the journal stream
(``services/parse/journal.py``): the unit's state changed, and how."""


def unit_line(msg: str) -> UnitLine | None:
    """What one of PID 1's messages about a unit says (:data:`UNIT_LINES`), or None."""
    for kind, pattern in UNIT_LINES:
        if pattern.search(msg):
            return kind
    return None
