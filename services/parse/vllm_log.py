"""Parsers for the journal text of one vLLM start: load phase and progress, stats lines, version.

Input is what ``journalctl -a`` prints for the current start, with ``-o cat`` (bare messages) or the
short format (``Dec 02 13:26:14 host vllm[1234]: ``). tqdm progress bars write ``\\r`` before every
update, so one journal line may hold several updates; every ``\\r``-separated piece is treated as its
own line, in order. All functions are pure: no I/O, no clock.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Literal

from services.models import LoadProgress, Phase, StatsLine

__all__ = [
    "ENGINE_DEATH",
    "LINE_MARKERS",
    "line_marker",
    "load_durations",
    "parse_banner_version",
    "parse_load_progress",
    "parse_non_default_args",
    "parse_stats_lines",
    "split_lines",
]

# `Dec 02 13:26:14 host vllm[1234]: ` -- journalctl's short format; IDENT may lack a [PID].
_JOURNAL_PREFIX = re.compile(
    r"^(?P<ts>[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2})(?:\.\d+)? \S+ [^\s:\[]+(?:\[\d+\])?: ?"
)
# `(APIServer pid=1) `, `(VllmWorker rank=2 pid=229) `, `(RayWorkerWrapper pid=406, ip=10.0.0.1) `.
_PROCESS_PREFIX = re.compile(r"^\((?:[A-Za-z][\w-]*)(?: [^()]*)?\) ")
# `INFO 02-21 13:26:20 [file.py:12] `; before Feb 2025 the opening bracket was missing.
_LEVEL_PREFIX = re.compile(
    r"^(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) (?P<ts>\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\.\d+)? "
    r"\[?[^\s\]]+:\d+\] "
)
# uvicorn's own format has no timestamp: `INFO:     Application startup complete.`
_UVICORN_PREFIX = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")


@dataclass(frozen=True)
class LogLine:
    """One logical log message with its prefixes removed and the timestamps they carried."""

    msg: str
    vllm_ts: str | None = None  # `MM-DD HH:MM:SS` from vLLM's formatter
    journal_ts: str | None = None  # `Mon DD HH:MM:SS` from journalctl's short format


def _strip_prefixes(piece: str) -> tuple[str, str | None, str | None]:
    journal_ts = vllm_ts = None
    m = _JOURNAL_PREFIX.match(piece)
    if m:
        journal_ts = m.group("ts")
        piece = piece[m.end() :]
    # Process and level prefixes can repeat when a worker's output is relayed by another process.
    for _ in range(3):
        m = _PROCESS_PREFIX.match(piece)
        if m:
            piece = piece[m.end() :]
        m = _LEVEL_PREFIX.match(piece)
        if m:
            vllm_ts = m.group("ts")
            piece = piece[m.end() :]
            continue
        m = _UVICORN_PREFIX.match(piece)
        if m:
            piece = piece[m.end() :]
        break
    return piece.strip(), vllm_ts, journal_ts


def split_lines(text: str) -> tuple[LogLine, ...]:
    """Split journal text into logical messages, oldest first, with all known prefixes stripped.

    A tqdm update after a ``\\r`` carries no prefix of its own, but belongs to the same journal entry,
    so it inherits the journal timestamp of the line it came in.
    """
    return _split_cached(text)


# Phase, stats line and version are all read from the same journal text of one probe: split it once.
@functools.lru_cache(maxsize=64)
def _split_cached(text: str) -> tuple[LogLine, ...]:
    out: list[LogLine] = []
    for raw in text.replace("\r\n", "\n").split("\n"):
        pieces = raw.split("\r")
        first_journal_ts: str | None = None
        for i, piece in enumerate(pieces):
            msg, vllm_ts, journal_ts = _strip_prefixes(piece)
            if i == 0:
                first_journal_ts = journal_ts
            elif journal_ts is None:
                journal_ts = first_journal_ts
            if msg:
                out.append(LogLine(msg, vllm_ts, journal_ts))
    return tuple(out)


# --- load phase and progress ------------------------------------------------------------------------

# Checked from the most advanced phase down, so a line naming two phases (`init engine (profile, create
# kv cache, ...) took`) counts as the later one.
_PHASE_MARKERS: list[tuple[Phase, re.Pattern[str]]] = [
    ("ready", re.compile(r"Application startup complete\.|API server: HTTP server started")),
    (
        "starting_api",
        re.compile(
            r"Graph capturing finished|init engine \(profile, create kv cache, warmup model\) took|"
            r"Starting vLLM (?:API )?server|Available routes are|Started server process|"
            r"Waiting for application startup|API server: waiting for HTTP server"
        ),
    ),
    (
        "compiling",
        re.compile(r"Dynamo bytecode transform|torch\.compile|Capturing CUDA graphs|Compiling a graph"),
    ),
    (
        "kv_cache",
        re.compile(
            r"Model loading took|Available KV cache memory|GPU KV cache size|Memory profiling|"
            r"init engine"
        ),
    ),
    (
        "loading_weights",
        re.compile(
            r"Starting to load model|Loading weights|Filesystem type for checkpoints|"
            r"% Completed \| \d+/\d+|"
            r"(?:Loading (?:safetensors|pt|np_cache)|Multi-thread loading)"
        ),
    ),
    ("waiting_for_gpu", re.compile(r"Waiting for GPU memory")),
]

# vLLM's weight bar: `{desc}: {pct:3.0f}% Completed | {n}/{total} [{elapsed}<{remaining}, {rate}]`.
# CUDA-graph capture uses a plain tqdm bar (`100%|████|`), so `% Completed |` singles out weights.
_WEIGHT_PROGRESS = re.compile(
    r"(?P<pct>\d+)% Completed \| (?P<n>\d+)/(?P<total>\d+)"
    r"(?: \[(?P<elapsed>[\d:]+)<(?P<remaining>[\d:]+|\?)(?:,\s*(?P<rate>[^\]]*))?\])?"
)

# (priority, pattern): a specific cause beats the generic "initialization failed" it leads to, which
# beats systemd noticing the exit. Within one priority the earliest line is the root cause.
_FAILURE_MARKERS: list[tuple[int, re.Pattern[str]]] = [
    (
        0,
        re.compile(
            r"torch\.OutOfMemoryError|CUDA out of memory|Failed to load model - not enough GPU memory"
        ),
    ),
    (0, re.compile(r"Timed out waiting for engine core processes to start")),
    (0, re.compile(r"unrecognized arguments:|error: argument")),
    (1, re.compile(r"RuntimeError: Engine core initialization failed")),
    (2, re.compile(r"Main process exited, code=")),
]
_FAILED_MAX_CHARS = 200


def _tqdm_seconds(value: str | None) -> float | None:
    """tqdm prints `MM:SS` or `H:MM:SS`, and `?` while it has no rate yet."""
    if not value or value == "?":
        return None
    total = 0
    for part in value.split(":"):
        if not part.isdigit():
            return None
        total = total * 60 + int(part)
    return float(total)


def _shorten(msg: str) -> str:
    return msg if len(msg) <= _FAILED_MAX_CHARS else msg[: _FAILED_MAX_CHARS - 1] + "…"


# The engine died under a running server (the health watcher's "stopped unexpectedly", exit 0 included).
ENGINE_DEATH = re.compile(
    r"EngineDeadError|EngineCore encountered (?:a fatal error|an issue)|Engine core proc \S+ died"
    r"|EngineCore[^\n]* died|engine core[^\n]* died",
    re.IGNORECASE,
)
LineMarker = Literal["ready", "load_failed", "engine_died"]
LINE_MARKERS: list[tuple[LineMarker, re.Pattern[str]]] = [
    ("ready", _PHASE_MARKERS[0][1]),
    # A failure of the load itself (priorities 0 and 1); systemd's own exit line is read as systemd's.
    ("load_failed", re.compile("|".join(f"(?:{p.pattern})" for prio, p in _FAILURE_MARKERS if prio < 2))),
    ("engine_died", ENGINE_DEATH),
]
"""What one log message of a running unit can say that must not wait for a poll, with the same patterns
:func:`parse_load_progress` and the health watcher read (``services/parse/journal.py`` streams them)."""


def line_marker(msg: str) -> LineMarker | None:
    """What one message of the unit's own output says (:data:`LINE_MARKERS`), read as
    :func:`parse_load_progress` reads a line (prefixes stripped, every ``\\r`` piece its own), or None."""
    found: LineMarker | None = None
    for line in _split_cached.__wrapped__(msg):  # one message: not worth a place in the probe's cache
        for marker, pattern in LINE_MARKERS:
            if pattern.search(line.msg):
                found = marker  # the last piece of a message decides, as the last line does for a phase
                break
    return found


_ANY_PHASE = re.compile("|".join(f"(?:{p.pattern})" for _, p in _PHASE_MARKERS))
_ANY_FAILURE = re.compile("|".join(f"(?:{p.pattern})" for _, p in _FAILURE_MARKERS))
_ALNUM = re.compile(r"[^\W_]")  # a letter or a digit (str.isalnum's characters)


def _plain_words(patterns: list[tuple[int, re.Pattern[str]]]) -> tuple[str, ...] | None:
    """The texts of patterns that are alternations of plain text, so a substring search can stand in for
    them (Python's regular expressions try such an alternation at every position); None if one is not."""
    words: list[str] = []
    for _, p in patterns:
        for piece in p.pattern.split("|"):
            if not re.fullmatch(r"(?:[^\\.^$*+?{}\[\]|()]|\\[.\-])+", piece):
                return None
            words.append(re.sub(r"\\(.)", r"\1", piece))
    return tuple(words)


_FAILURE_WORDS = _plain_words(_FAILURE_MARKERS)


def parse_load_progress(text: str) -> LoadProgress:
    """Where the current start is: phase from the last marker, weight-shard progress, failure marker.

    ``text`` must hold only the current start (e.g. ``journalctl _SYSTEMD_INVOCATION_ID=...``); a
    failure marker anywhere in it sets ``failed``.
    """
    lines = split_lines(text)
    # The phase, the shard progress and the last line are each the newest of their kind: read from the end,
    # they are found after a few lines instead of every line of a long start being searched three ways.
    phase: Phase | None = None
    for line in reversed(lines):
        if _ANY_PHASE.search(line.msg):
            phase = next(name for name, pattern in _PHASE_MARKERS if pattern.search(line.msg))
            break
    progress = next((m for line in reversed(lines)
                     if "% Completed | " in line.msg and (m := _WEIGHT_PROGRESS.search(line.msg))), None)
    # Banner art and separators carry no information for a status line.
    last_line = next((line.msg for line in reversed(lines) if _ALNUM.search(line.msg)), "")
    # The most serious failure marker anywhere; most starts have none, which one search of the text tells.
    failure: tuple[int, str] | None = None
    if any(w in text for w in _FAILURE_WORDS) if _FAILURE_WORDS is not None else _ANY_FAILURE.search(text):
        for line in lines:
            if _ANY_FAILURE.search(line.msg):
                for prio, pattern in _FAILURE_MARKERS:
                    if pattern.search(line.msg) and (failure is None or prio < failure[0]):
                        failure = (prio, _shorten(line.msg))
                        break

    result = LoadProgress(phase=phase, last_line=last_line, failed=failure[1] if failure else None)
    if progress is not None:
        done, total = int(progress.group("n")), int(progress.group("total"))
        result.done = done
        result.total = total
        result.fraction = done / total if total else None
        result.weights_elapsed_s = _tqdm_seconds(progress.group("elapsed"))
        result.weights_remaining_s = _tqdm_seconds(progress.group("remaining"))
    return result


# --- periodic stats line ----------------------------------------------------------------------------

_STATS_CORE = re.compile(
    r"Avg prompt throughput: (?P<prompt>[\d.]+) tokens/s, Avg generation throughput: (?P<gen>[\d.]+) "
    r"tokens/s, Running: (?P<running>\d+) reqs"
)
# V1 says `Waiting`, V0 said `Pending` (V0's `Swapped` has no V1 counterpart and is ignored).
_STATS_WAITING = re.compile(r"\b(?:Waiting|Pending): (\d+) reqs")
# First match wins: V0 prints GPU then CPU usage, and the CPU build prints only `CPU KV cache usage`.
_STATS_KV = re.compile(r"\b(?:GPU|CPU) KV cache usage: ([\d.]+)%")
# Case-sensitive on purpose: `External prefix cache hit rate` must not be taken for the main one.
_STATS_PREFIX_HIT = re.compile(r"(?:^|, )Prefix cache hit rate: ([\d.]+)%")

_MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), start=1)}


def _tz(offset: str) -> timezone:
    m = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", offset.strip())
    if not m:
        # Same rule as services.parse.systemd.parse_offset: an unreadable `date +%z` means UTC, not a crash.
        return UTC
    delta = timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
    return timezone(-delta if m.group(1) == "-" else delta)


def _line_time(line: LogLine, year: int, tz: timezone) -> datetime | None:
    try:
        if line.vllm_ts:
            return datetime.strptime(f"{year}-{line.vllm_ts}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=tz)
        if line.journal_ts:
            mon, day, hms = line.journal_ts.split()
            h, mi, s = (int(x) for x in hms.split(":"))
            return datetime(year, _MONTHS[mon], int(day), h, mi, s, tzinfo=tz)
    except (ValueError, KeyError):
        # A Feb 29 stamp with a non-leap `year`, or a locale's month name: no time rather than a crash.
        return None
    return None


def _fraction(m: re.Match[str] | None) -> float | None:
    # The log prints one decimal of a percentage; rounding drops the float noise of the division.
    return round(float(m.group(1)) / 100, 6) if m else None


def parse_stats_lines(text: str, year: int, tz_offset: str = "+0000") -> StatsLine | None:
    """The newest periodic stats line (V1 ``Engine 000: ...`` or V0 format), or None if there is none.

    Timestamps in the log carry no year and are local time: ``year`` and ``tz_offset`` (``+0100``)
    supply both (an unreadable offset counts as UTC). KV usage and prefix hit rate are returned as
    fractions. With several unaggregated DP engines this is only the engine that logged last.
    """
    tz = _tz(tz_offset)
    for line in reversed(split_lines(text)):
        core = _STATS_CORE.search(line.msg)
        if not core:
            continue
        waiting = _STATS_WAITING.search(line.msg, core.end())
        kv = _STATS_KV.search(line.msg, core.end())
        hit = _STATS_PREFIX_HIT.search(line.msg, core.end())
        return StatsLine(
            prompt_tps=float(core.group("prompt")),
            generation_tps=float(core.group("gen")),
            running=int(core.group("running")),
            waiting=int(waiting.group(1)) if waiting else 0,
            kv_cache_usage=_fraction(kv),
            prefix_cache_hit_rate=_fraction(hit),
            at=_line_time(line, year, tz),
        )
    return None


# --- version and durations --------------------------------------------------------------------------

_VERSION_PATTERNS = [
    re.compile(r"vLLM server version (\S+?),? serving model"),
    re.compile(r"vLLM API server version (\S+)"),
    re.compile(r"Initializing an? (?:V1 )?LLM engine \(v([^)\s]+)\)"),
    # The ASCII-art banner's third line ends `version 0.23.0`; require a digit so prose can't match.
    re.compile(r"\bversion (\d+\.\d+\S*)$"),
]


def parse_banner_version(text: str) -> str | None:
    """The vLLM version the start announced (banner, plain banner, or engine-config line)."""
    for line in split_lines(text):
        for pattern in _VERSION_PATTERNS:
            m = pattern.search(line.msg)
            if m:
                return m.group(1).rstrip(",")
    return None


_DURATIONS: list[tuple[re.Pattern[str], tuple[str, ...]]] = [
    (re.compile(r"Loading weights took ([\d.]+) s"), ("weights_s",)),
    (
        re.compile(r"Model loading took ([\d.]+) GiB(?: memory)? and ([\d.]+) s"),
        ("model_loading_gib", "model_loading_s"),
    ),
    (re.compile(r"torch\.compile takes ([\d.]+) s in total"), ("torch_compile_s",)),
    (
        re.compile(r"Graph capturing finished in ([\d.]+) secs?(?:, took ([\d.]+) GiB)?"),
        ("graph_capture_s", "graph_capture_gib"),
    ),
    (
        re.compile(r"init engine \([^)]*\) took ([\d.]+) s(?:econds)?(?: \(compilation: ([\d.]+) s)?"),
        ("init_engine_s", "compilation_s"),
    ),
]


def load_durations(text: str) -> dict[str, float]:
    """Durations (and memory) vLLM reported for the phases of this start; later lines win.

    Keys, when present: ``weights_s``, ``model_loading_s``, ``model_loading_gib``, ``torch_compile_s``,
    ``graph_capture_s``, ``graph_capture_gib``, ``init_engine_s``, ``compilation_s``.
    """
    found: dict[str, float] = {}
    for line in split_lines(text):
        for pattern, keys in _DURATIONS:
            m = pattern.search(line.msg)
            if not m:
                continue
            for key, value in zip(keys, m.groups(), strict=True):
                if value is not None:
                    found[key] = float(value)
    return found


# --- the start-up line listing every argument that differs from its default ------------------------------

_NON_DEFAULT = re.compile(r"non-default args: (?P<body>\{.*\})\s*$")
_DICT_KEY = re.compile(r"""\s*(?P<q>['"])(?P<k>[A-Za-z_][\w.\-]*)(?P=q)\s*:\s*""")


class RawValue(str):
    """A value vLLM logged as an object repr that is no Python literal (kept as the text it logged)."""


def _value_end(body: str, start: int) -> int:
    """Index of the top-level ``,`` (or the end) that closes the value starting at ``start``."""
    depth, quote, i = 0, "", start
    while i < len(body):
        c = body[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            return i
        i += 1
    return len(body)


def _literal(text: str) -> object:
    try:
        value: object = ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return RawValue(text)
    return value


def _entries(body: str, key_re: re.Pattern[str]) -> dict[str, object] | None:
    out: dict[str, object] = {}
    i = 0
    while i < len(body):
        m = key_re.match(body, i)
        if m is None:
            return out or None
        end = _value_end(body, m.end())
        out[m["k"]] = _literal(body[m.end() : end].strip())
        i = end + 1
    return out


def parse_non_default_args(text: str) -> dict[str, object] | None:
    """The newest ``non-default args: {…}`` line of ``text`` as a dict (argparse dest -> Python value).

    vLLM (since May 2025) logs every argument that differs from its default as a Python dict repr (older
    versions logged ``args: Namespace(…)`` with every argument, defaults included: not read). Values are
    Python literals (``True``,
    lists, dicts for JSON flags); an object repr that is no literal is kept as a :class:`RawValue`.
    The dict holds secrets (``api_key``, ``hf_token``) in clear text: redact before showing anything.
    """
    found: dict[str, object] | None = None
    for line in split_lines(text):
        m = _NON_DEFAULT.search(line.msg)
        if m is not None:
            body = m["body"]
            whole = _literal(body)
            if isinstance(whole, dict) and all(isinstance(k, str) for k in whole):
                found = {str(k): v for k, v in whole.items()}
            else:
                found = _entries(body[1:-1], _DICT_KEY) or found
    return found
