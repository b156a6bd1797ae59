"""Parsers for ``vllm bench serve --save-result`` files and the one-line summary inferbot shows.

The node usually sends a ``grep -oE`` extract of a few top-level keys instead of whole files (detailed
results can be megabytes); :func:`parse_bench_extract` reads that, :func:`parse_bench_json` full JSON.
Both return plain dicts, one per benchmark run, with ``_file`` set to the path they came from.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from services.models import BenchResult, BenchSummary

__all__ = ["format_bench", "parse_bench_extract", "parse_bench_json", "summarize_bench"]

FILE_KEY = "_file"

_EXTRACT_LINE = re.compile(r'"(?P<key>[A-Za-z0-9_.]+)": ?(?P<value>"[^"]*"|[-0-9.eE+]+|null)\s*$')
_STAMP = re.compile(r"(\d{8})-(\d{6})")
_JSON_START = re.compile(r"[{\[]")


def _value(raw: str) -> Any:
    if raw == "null":
        return None
    if raw.startswith('"'):
        return raw[1:-1]
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        return raw


def _stamp_from_path(path: str) -> str | None:
    # vLLM names files `...-YYYYMMDD-HHMMSS.json`; the last stamp in the path is the file's own.
    found = _STAMP.findall(path)
    return f"{found[-1][0]}-{found[-1][1]}" if found else None


def _finish(record: dict[str, Any], path: str) -> dict[str, Any]:
    record[FILE_KEY] = path
    if not record.get("date"):
        stamp = _stamp_from_path(path)
        if stamp:
            record["date"] = stamp
    return record


def parse_bench_extract(path: str, text: str) -> list[dict[str, Any]]:
    """Records from the ``grep -oE '"(date|...)": ?(...)'`` extract of one bench file.

    One ``"key": value`` per line. ``--append-result`` files hold several runs, so a record starts at
    every ``date`` key (or when a key repeats, for runs saved without a date).
    """
    records: list[dict[str, Any]] = []
    current: dict[str, Any] = {}
    for line in text.splitlines():
        # grep over several files prefixes `path:`; the match itself starts at the first quote.
        quote = line.find('"')
        if quote < 0:
            continue
        m = _EXTRACT_LINE.match(line[quote:].strip())
        if not m:
            continue
        key = m.group("key")
        if current and (key == "date" or key in current):
            records.append(current)
            current = {}
        current[key] = _value(m.group("value"))
    if current:
        records.append(current)
    return [_finish(r, path) for r in records]


def parse_bench_json(path: str, text: str) -> list[dict[str, Any]]:
    """Records from a whole bench file: one JSON object, a list of them, or objects one per line.

    Unreadable fragments are skipped: one corrupt run in an ``--append-result`` file should not hide
    the others.
    """
    decoder = json.JSONDecoder()
    records: list[dict[str, Any]] = []
    pos = 0
    while True:
        opening = _JSON_START.search(text, pos)
        if opening is None:
            break
        start = opening.start()
        try:
            obj, end = decoder.raw_decode(text, start)
        except json.JSONDecodeError:
            # Resume at the next line that looks like the start of an object.
            nxt = text.find("\n{", start + 1)
            if nxt < 0:
                break
            pos = nxt + 1
            continue
        items = obj if isinstance(obj, list) else [obj]
        records.extend(_finish(dict(item), path) for item in items if isinstance(item, dict))
        pos = end
    return records


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _concurrency(value: Any) -> int | None:
    num = _number(value)
    return int(num) if num is not None else None


def _date(record: dict[str, Any]) -> str:
    stamp = record.get("date")
    if not isinstance(stamp, str) or not _STAMP.fullmatch(stamp):
        stamp = _stamp_from_path(str(record.get(FILE_KEY, ""))) or ""
    return stamp


def summarize_bench(records: list[dict[str, Any]]) -> BenchSummary:
    """Single-stream and peak output throughput from the newest run at each max_concurrency.

    An older run at the same concurrency is superseded (the model, flags or hardware may have changed
    since). Peak uses ``output_throughput``, never ``max_output_tokens_per_s``: the latter is a one-second
    burst, not a sustainable rate. Runs with ``completed == 0`` or no ``output_throughput`` are ignored.
    """
    newest: dict[int | None, tuple[str, dict[str, Any]]] = {}
    for record in records:
        if _number(record.get("output_throughput")) is None or record.get("completed") == 0:
            continue
        conc = _concurrency(record.get("max_concurrency"))
        stamp = _date(record)
        # `>=`: for equal stamps the record listed later (appended later) wins.
        if conc not in newest or stamp >= newest[conc][0]:
            newest[conc] = (stamp, record)

    results = {conc: _result(stamp, rec) for conc, (stamp, rec) in newest.items()}
    peak = max(results.values(), key=lambda r: r.output_throughput, default=None)
    return BenchSummary(single_stream=results.get(1), peak=peak)


def _result(stamp: str, record: dict[str, Any]) -> BenchResult:
    tput = _number(record.get("output_throughput"))
    return BenchResult(
        output_throughput=tput if tput is not None else 0.0,
        max_concurrency=_concurrency(record.get("max_concurrency")),
        date=f"{stamp[:4]}-{stamp[4:6]}-{stamp[6:8]}" if stamp else "",
        file=str(record.get(FILE_KEY, "")),
    )


def _tps(value: float) -> str:
    # One decimal only where it is significant.
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def format_bench(summary: BenchSummary) -> str:
    """One line like ``82.5 tok/s single-stream (2026-02-21), 1,536 tok/s peak (concurrency 64, ...)``.

    Returns an empty string when there is nothing to show; the peak is left out when it is the
    single-stream run itself.
    """
    parts: list[str] = []
    single, peak = summary.single_stream, summary.peak
    if single is not None:
        parts.append(f"{_tps(single.output_throughput)} tok/s single-stream ({single.date})")
    if peak is not None and not (single is not None and peak.max_concurrency == 1):
        conc = "unlimited" if peak.max_concurrency is None else str(peak.max_concurrency)
        parts.append(f"{_tps(peak.output_throughput)} tok/s peak (concurrency {conc}, {peak.date})")
    return ", ".join(parts)
