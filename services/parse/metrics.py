"""Parsers for vLLM's Prometheus ``/metrics`` text, and throughput derived from two scrapes or a log line.

Servers of different ages expose different names for the same thing (``gpu_cache_usage_perc`` became
``kv_cache_usage_perc``, ``time_per_output_token_seconds`` became ``inter_token_latency_seconds``); both
are read and folded into one :class:`MetricsSample`. Pure functions, no I/O, no clock.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from datetime import datetime

from services.models import MetricsSample, StatsLine, Throughput

__all__ = [
    "MetricsParseError",
    "histogram_quantile",
    "parse_metrics",
    "throughput_from_samples",
    "throughput_from_stats",
]

_PROMPT = "vllm:prompt_tokens"
_GENERATION = "vllm:generation_tokens"
_RUNNING = "vllm:num_requests_running"
_WAITING = "vllm:num_requests_waiting"
_KV_NEW = "vllm:kv_cache_usage_perc"
_KV_OLD = "vllm:gpu_cache_usage_perc"
_TTFT = "vllm:time_to_first_token_seconds"
_ITL_NEW = "vllm:inter_token_latency_seconds"
_ITL_OLD = "vllm:time_per_output_token_seconds"
_HISTOGRAMS = (_TTFT, _ITL_NEW, _ITL_OLD)

Buckets = list[tuple[float, float]]


class MetricsParseError(ValueError):
    """The ``/metrics`` body is not Prometheus text exposition (HTML error page, truncated body, ...)."""


def _counter_base(name: str) -> str:
    # prometheus_client strips `_total` from counter *family* names but keeps it on samples, and an
    # untyped exposition keeps it everywhere: compare on the bare name.
    return name[: -len("_total")] if name.endswith("_total") else name


def parse_metrics(text: str) -> MetricsSample:
    """Fold one ``/metrics`` scrape into a :class:`MetricsSample`, summing across engines and models.

    Counters and request gauges are summed over label sets; KV-cache usage (a fraction per engine) is
    averaged, since a sum of fractions is meaningless. Histogram buckets are summed per ``le``.
    Raises :class:`MetricsParseError` when the text is not Prometheus exposition.
    """
    return _parse(text)


# The plainest exposition lines, ``name{label="value",…} number`` (what the watcher's filtered scrape is made
# of): read by one regular expression instead of prometheus_client's parser, whose general grammar is far more
# work than these lines need, on every node every watcher interval. Only a text whose every line has this
# shape (no comments, no escapes, no quotes or braces inside values, no reserved or repeated label names, no
# timestamps, decimal numbers) takes this path, and it yields exactly the samples prometheus_client yields for
# it (tests/test_parse_metrics.py compares them); anything else goes to prometheus_client.
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="[^{}"\\\n]*"'
_PLAIN_LINE = re.compile(rf"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{{((?:{_LABEL}(?:,{_LABEL})*,?)?)\}})?"
                         r" (-?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?)")
_PLAIN_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="([^{}"\\\n]*)"')

Samples = list[tuple[str, dict[str, str], float]]


def _plain_samples(text: str) -> Samples | None:
    """``(name, labels, value)`` of every line when all of them are plain (see above); None otherwise."""
    out: Samples = []
    for raw in text.split("\n"):
        line = raw.strip()
        if not line:
            continue
        m = _PLAIN_LINE.fullmatch(line)
        if m is None:
            return None
        labels: dict[str, str] = {}
        if m[2]:
            for name, value in _PLAIN_LABEL.findall(m[2]):
                if name in labels or name.startswith("__"):
                    return None
                labels[name] = value
        out.append((m[1], labels, float(m[3])))
    return out


def _library_samples(text: str) -> Samples:
    # Imported on the first scrape parsed that needs it, not with the module: most questions parse none.
    from prometheus_client.parser import text_string_to_metric_families

    return [(s.name, s.labels, float(s.value)) for family in text_string_to_metric_families(text)
            for s in family.samples]


# Only a few families of a whole exposition are read (tokens, request and KV-cache gauges, the TTFT and ITL
# histograms' buckets): a busy server's scrape is ~600 lines, of which ~60 are those, and parsing the rest (every
# other histogram, the HTTP and process collectors, the HELP and TYPE lines) was most of a status answer's
# client work. So a text that is plainly an exposition, whole, is cut to the sample lines of those families
# first (found by one regular expression on their names), plus the first vLLM sample naming the model
# (``model_name`` is read from the first one), and those go on as any text does. A text with any other kind of
# line (an HTML error page, an indented line) or cut short (no final newline) is parsed whole, as before, and
# fails as before.
_READ = (_PROMPT, f"{_PROMPT}_total", _GENERATION, f"{_GENERATION}_total", _RUNNING, _WAITING, _KV_NEW, _KV_OLD,
         *(f"{h}_bucket" for h in _HISTOGRAMS))
# Each pattern starts with a newline and a literal, so that the regular expression engine scans for it rather than
# trying every position of the text (a line-anchored pattern is tried at every character).
_READ_LINE = re.compile(rf"\n((?:{'|'.join(map(re.escape, _READ))})[{{ ][^\n]*)")
_MODEL_LINE = re.compile(r'\n((vllm:[a-zA-Z0-9_:]*)\{[^\n]*?[{,]model_name="[^"\n][^\n]*)')
_ODD_LINE = re.compile(r"\n[^#a-zA-Z_:\n]")


def _read_lines(text: str) -> str:
    """The lines of ``text`` :func:`_parse_from` reads, when it is whole and plainly an exposition; else all."""
    lines = "\n" + text
    if (text and not text.endswith("\n")) or _ODD_LINE.search(lines):
        return text
    kept = _READ_LINE.findall(lines)
    first = _MODEL_LINE.search(lines)
    if first is not None and first[2] not in _READ:
        kept.insert(0, first[1])  # it only names the model: its value is not read
    return "\n".join(kept)


def _parse(text: str) -> MetricsSample:
    try:
        text = _read_lines(text)
        samples = _plain_samples(text)
        return _parse_from(_library_samples(text) if samples is None else samples)
    except Exception as exc:  # the parser raises ValueError, KeyError, IndexError ... on bad input
        raise MetricsParseError(f"not Prometheus text exposition: {str(exc)[:200]}") from exc


def _parse_from(samples: Samples) -> MetricsSample:
    """Fold parsed samples into a :class:`MetricsSample` (see :func:`parse_metrics`)."""
    sums: dict[str, float] = defaultdict(float)
    kv: dict[str, list[float]] = {_KV_NEW: [], _KV_OLD: []}
    buckets: dict[str, dict[float, float]] = {name: defaultdict(float) for name in _HISTOGRAMS}
    model_name: str | None = None
    for name, labels, value in samples:
        if not name.startswith("vllm:"):
            continue
        if model_name is None and labels.get("model_name"):
            model_name = labels["model_name"]
        if name.endswith("_created"):
            continue
        if name.endswith("_bucket") and name[: -len("_bucket")] in buckets:
            buckets[name[: -len("_bucket")]][float(labels["le"])] += value
        elif name in kv:
            kv[name].append(value)
        elif name in (_RUNNING, _WAITING) or _counter_base(name) in (_PROMPT, _GENERATION):
            sums[_counter_base(name)] += value

    kv_values = kv[_KV_NEW] or kv[_KV_OLD]
    itl = buckets[_ITL_NEW] or buckets[_ITL_OLD]
    return MetricsSample(
        prompt_tokens_total=sums.get(_PROMPT),
        generation_tokens_total=sums.get(_GENERATION),
        running=sums.get(_RUNNING),
        waiting=sums.get(_WAITING),
        kv_cache_usage=sum(kv_values) / len(kv_values) if kv_values else None,
        ttft_buckets=sorted(buckets[_TTFT].items()),
        itl_buckets=sorted(itl.items()),
        model_name=model_name,
    )


def histogram_quantile(q: float, buckets: Buckets) -> float | None:
    """Prometheus ``histogram_quantile`` over cumulative ``(le, count)`` buckets; None without data.

    Same rules as Prometheus: linear interpolation inside the bucket, the lowest bucket starts at 0,
    and a rank that falls in the ``+Inf`` bucket returns the highest finite bound.
    """
    if len(buckets) < 2 or not math.isinf(buckets[-1][0]):
        return None
    # Scrapes are not atomic, so counts can dip by a few; Prometheus flattens them the same way.
    fixed: Buckets = []
    running_max = 0.0
    for le, count in buckets:
        running_max = max(running_max, count)
        fixed.append((le, running_max))
    total = fixed[-1][1]
    if total <= 0:
        return None
    rank = q * total
    idx = next(i for i, (_, count) in enumerate(fixed) if count >= rank)
    if idx == len(fixed) - 1:
        return fixed[-2][0]
    upper, count = fixed[idx]
    if idx == 0:
        if upper <= 0:
            return upper
        lower, below = 0.0, 0.0
    else:
        lower, below = fixed[idx - 1]
    in_bucket = count - below
    if in_bucket <= 0:
        return upper
    return lower + (upper - lower) * ((rank - below) / in_bucket)


def _window_buckets(a: Buckets, b: Buckets) -> Buckets:
    """Buckets for the observations between two scrapes, else b's cumulative ones.

    b's cumulative buckets are the fallback when nothing new was observed (a quiet window still
    deserves a latency figure), when the bucket layout changed, or when a count went backwards (the
    server restarted, so b alone is the history since then).
    """
    if not b:
        return []
    if [le for le, _ in a] != [le for le, _ in b]:
        return b
    delta = [(le, cb - ca) for (le, ca), (_, cb) in zip(a, b, strict=True)]
    if any(d < 0 for _, d in delta) or delta[-1][1] <= 0:
        return b
    return delta


def _ms(value: float | None) -> float | None:
    return value * 1000 if value is not None else None


def _rate(a: float | None, b: float | None, dt_s: float) -> float | None:
    # A counter that went down means the server restarted between scrapes: no honest rate exists.
    if a is None or b is None or dt_s <= 0 or b < a:
        return None
    return (b - a) / dt_s


def _int(value: float | None) -> int | None:
    return round(value) if value is not None else None


def throughput_from_samples(a: MetricsSample, b: MetricsSample, dt_s: float) -> Throughput:
    """Throughput between scrape ``a`` and the later scrape ``b``, ``dt_s`` seconds apart.

    Token rates come from counter deltas (None after a counter reset); gauges come from ``b``;
    TTFT/ITL percentiles (ms) from the bucket deltas of the window.
    """
    ttft = _window_buckets(a.ttft_buckets, b.ttft_buckets)
    itl = _window_buckets(a.itl_buckets, b.itl_buckets)
    return Throughput(
        generation_tps=_rate(a.generation_tokens_total, b.generation_tokens_total, dt_s),
        prompt_tps=_rate(a.prompt_tokens_total, b.prompt_tokens_total, dt_s),
        running=_int(b.running),
        waiting=_int(b.waiting),
        kv_cache_usage=b.kv_cache_usage,
        source="metrics",
        age_seconds=0.0,
        ttft_p50_ms=_ms(histogram_quantile(0.5, ttft)),
        ttft_p99_ms=_ms(histogram_quantile(0.99, ttft)),
        itl_p50_ms=_ms(histogram_quantile(0.5, itl)),
        itl_p99_ms=_ms(histogram_quantile(0.99, itl)),
    )


def throughput_from_stats(line: StatsLine, now: datetime) -> Throughput:
    """Throughput as the newest stats log line reported it; ``age_seconds`` is how old that line is.

    ``now`` must be timezone-aware when ``line.at`` is (as :func:`parse_stats_lines` returns it).
    A line stamped slightly in the future (node clock ahead) counts as age 0.
    """
    age = max(0.0, (now - line.at).total_seconds()) if line.at is not None else None
    return Throughput(
        generation_tps=line.generation_tps,
        prompt_tps=line.prompt_tps,
        running=line.running,
        waiting=line.waiting,
        kv_cache_usage=line.kv_cache_usage,
        source="log",
        age_seconds=age,
    )
