"""The probe's remote script, assembled from its packaged parts: the shell (``*.sh``) and awk (``*.awk``)
files beside this module, read once per process.

The script is fixed text plus the question's settings (numbers and switches chosen by handlers) and the
units' values the config validated (unit names, URLs, paths; checked again here), each through
``shlex.quote``. No text from a chat message ever reaches it, and API keys travel on stdin
(:func:`stdin_for`), never in it.
"""

from __future__ import annotations

import functools
import shlex
from importlib import resources

from config.models import API_URL_RE, PATH_RE, UNIT_RE
from services.node.probe.options import (
    ARGS_SCAN,
    BENCH_RE,
    DISCOVER_PATTERN,
    JOURNAL_FILTER,
    JOURNAL_SCAN,
    MAX_ARGV_BYTES,
    MAX_PROCS,
    METRICS_FILTER,
    METRICS_READ_FILTER,
    SHOW_PROPERTIES,
    ProbeOptions,
    ProbeTarget,
)
from services.node.probe.wire import MARK

# The shell functions, in the order they are sent (common.sh runs at once: the others use it).
LIBRARY = ("common.sh", "processes.sh", "http.sh", "unit.sh", "answer.sh")
DISCOVERY = "discover.sh"  # sent only when the question asks for discovery
# The awk programs, by the shell variable that holds them.
AWK_PROGRAMS = {"BENCH_AWK": "bench.awk", "JOURNAL_AWK": "journal.awk", "PROCESSES_AWK": "processes.awk",
                "METRICS_AWK": "metrics.awk"}
SHELL_FILES = (*LIBRARY, DISCOVERY)


def resource_text(name: str) -> str:
    """One of the probe's packaged files, as written."""
    return resources.files(__package__ or "services.node.probe").joinpath(name).read_text(encoding="utf-8")


def minify(text: str) -> str:
    """A part of the script as sent: no comment lines, no indentation, no blank lines (a third of its bytes).

    Safe for these files: no line of them (nor of their awk programs) starts with ``#`` unless it is a
    comment, no quoted string spans a blank or an indented line whose spaces matter, and a
    backslash-continued line keeps the space before its backslash. shellcheck's ``disable`` directives stay
    (a few bytes), so the script that is checked is the one that is sent.
    """
    out = (line.lstrip() for line in text.split("\n"))
    return "\n".join(line for line in out if line and (line[0] != "#" or line.startswith("# shellcheck disable=")))


def _q(value: str | int) -> str:
    return shlex.quote(str(value))


def _assign(values: dict[str, str | int]) -> str:
    return "; ".join(f"{name}={_q(value)}" for name, value in values.items())


def _part(name: str, readable: bool) -> str:
    text = resource_text(name)
    return text.rstrip("\n") if readable else minify(text)


@functools.cache
def library(readable: bool = False) -> str:
    """The part of every probe script that never changes: the constants, the awk programs and the shell
    functions, as sent (``readable``: as written, with their comments). Its first lines pick the answer's
    marker."""
    constants = _assign({"MARK_BASE": MARK, "SHOW_PROPERTIES": SHOW_PROPERTIES, "MAX_PROCS": MAX_PROCS,
                         "MAX_ARGV_BYTES": MAX_ARGV_BYTES, "ARGS_SCAN": ARGS_SCAN})
    # awk reads the patterns from its environment (-v would process backslashes).
    patterns = " ".join(f"{name}={_q(value)}" for name, value in (
        ("JOURNAL_FILTER", JOURNAL_FILTER), ("METRICS_FILTER", METRICS_FILTER),
        ("METRICS_READ_FILTER", METRICS_READ_FILTER), ("BENCH_PATTERN", BENCH_RE)))
    # Each program ends with a newline: the journal's follows the benchmark files' function.
    programs = [f"{name}={_q(_part(file, readable) + chr(10))}" for name, file in AWK_PROGRAMS.items()]
    return "\n".join([
        constants,
        f"export {patterns}",
        "# shellcheck disable=SC2016 # awk programs: their $ are awk's",
        "{", *programs, "}",
        *(_part(name, readable) for name in LIBRARY),
    ])


@functools.cache
def _discovery(readable: bool) -> str:
    return f"export DISCOVER_PATTERN={_q(DISCOVER_PATTERN)}\n" + _part(DISCOVERY, readable)


def _metrics_filter(options: ProbeOptions) -> int:
    """FILTER_METRICS: 0 the whole /metrics, 1 the watcher's lines (METRICS_FILTER), 2 the lines an answer reads
    (METRICS_READ_FILTER)."""
    return 1 if options.metrics_filter else (2 if options.metrics_read else 0)


def _settings(options: ProbeOptions) -> str:
    """The question: what to ask, as shell variables (numbers and 0/1 switches)."""
    return "\n".join([
        _assign({"ASK_GPUS": int(options.gpus), "ASK_SETTINGS": int(options.settings),
                 "ASK_API_INFO": int(options.api_info), "FILTER_METRICS": _metrics_filter(options),
                 "DISCOVER": int(options.discover)}),
        _assign({"HTTP_TIMEOUT": f"{options.http_timeout_s:g}", "METRICS_SAMPLES": options.metrics_samples,
                 "METRICS_INTERVAL": f"{options.metrics_interval_s:g}"}),
        _assign({"JOURNAL_LINES": options.journal_lines, "LOG_LINES": options.log_lines,
                 "JOURNAL_SCAN": max(JOURNAL_SCAN, options.journal_lines)}),
    ])


def _function(name: str, body: list[str]) -> str:
    return f"{name}() {{\n" + "\n".join(body or [":"]) + "\n}"


def _units(targets: list[ProbeTarget], options: ProbeOptions) -> str:
    """``read_api_keys`` (one line of stdin per target whose key the bot holds, see :func:`stdin_for`: into
    a shell variable, never an argv) and ``probe_units`` (``probe_unit`` of each target)."""
    keys: list[str] = []
    calls: list[str] = []
    for i, t in enumerate(targets):
        key = ""
        if t.models:
            keys.append(f"IFS= read -r api_key_{i} || api_key_{i}=''")
            key = f' "$api_key_{i}"'
        bench = (t.bench_dir or "") if options.bench else ""
        calls.append(f"probe_unit {_q(t.unit)} {_q(t.api_url or '')} {_q(t.log_file or '')} {_q(bench)}{key}")
    return _function("read_api_keys", keys) + "\n" + _function("probe_units", calls)


def _check(targets: list[ProbeTarget], session: bool) -> None:
    if session and any(t.models for t in targets):
        raise ValueError("a persistent probe reads no API key: its stdin is the trigger")
    for t in targets:
        # Defence in depth: the config validated these, but the script must never see anything else.
        if not UNIT_RE.match(t.unit):
            raise ValueError(f"refusing unit name {t.unit!r}")
        if t.api_url and not API_URL_RE.match(t.api_url):
            raise ValueError(f"refusing api_url {t.api_url!r}")
        for p in (t.log_file, t.bench_dir):
            if p and not PATH_RE.match(p):
                raise ValueError(f"refusing path {p!r}")


def build_script(targets: list[ProbeTarget], options: ProbeOptions, session: bool = False,
                 readable: bool = False) -> str:
    """The remote script for ``targets`` (or unit discovery when ``options.discover``).

    ``session``: the same probe as a loop that answers once per line read from stdin, each answer followed
    by the line ``<marker> done`` (:func:`~services.node.probe.wire.session_answer_end`), until stdin ends.
    What the bot writes is a trigger only: it is read into a variable nothing looks at, and the probe itself
    reads /dev/null, so no byte the bot sends reaches anything. It reads no API key (stdin is the trigger):
    a session cannot ask ``/v1/models`` with one.

    ``readable``: the same script with the packaged files as written (comments, indentation), for reading it
    and for shellcheck, whose findings then point at the files' own lines.
    """
    _check(targets, session)
    parts = [library(readable), _discovery(readable) if options.discover else "", _settings(options),
             _units(targets, options), "answer_each_line" if session else "answer_once"]
    return "\n".join(part for part in parts if part) + "\n"


def stdin_for(targets: list[ProbeTarget], keys: list[str | None]) -> str | None:
    """The probe's stdin: one API key per line, for the targets with ``models`` (in order)."""
    wanted = [k or "" for t, k in zip(targets, keys, strict=True) if t.models]
    if not wanted:
        return None
    for k in wanted:
        if "\n" in k or "\r" in k:
            raise ValueError("an API key may not contain a line break")
    return "".join(k + "\n" for k in wanted)


def remote_command(script: str) -> str:
    """The command line sent over SSH: the script run by ``sh`` whatever the login shell is (``exec``: the
    login shell does not stay around as a second process)."""
    return "exec sh -c " + shlex.quote(script)


@functools.lru_cache(maxsize=64)
def probe_command(targets: tuple[ProbeTarget, ...], options: ProbeOptions) -> str:
    """``remote_command(build_script(targets, options))``, one shared string per distinct probe.

    The command is some 20 KB of text and is referenced until its node has answered: built per node, a question to
    512 nodes held 512 copies of it and of the script it quotes while the answers arrived. Nodes that run
    the same units share one string (immutable, so sharing is safe), and the script is not built again for
    every node and question. It holds no secret (API keys go on stdin: ``stdin_for``). At most 64 are kept.
    """
    return remote_command(build_script(list(targets), options))


SESSIONS_KEPT = 4096  # distinct persistent-session commands remembered (about one per node at most)


@functools.lru_cache(maxsize=SESSIONS_KEPT)
def session_command(targets: tuple[ProbeTarget, ...], options: ProbeOptions) -> str:
    """The command of a persistent probe session (``build_script(..., session=True)``), one shared string
    per distinct probe.

    It is asked for every poll of every node (the pool compares it with its open session's to notice a
    changed config), so it is built once; sessions hold these strings anyway, so keeping them costs little.
    """
    return remote_command(build_script(list(targets), options, session=True))
