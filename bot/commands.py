"""The command table: the one source of truth for every intent (patterns, examples, help, guard)."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from handlers.context import Context, Request
from handlers.reply import Reply

Handler = Callable[[Context, Request], Awaitable[Reply]]


@dataclass(frozen=True)
class Command:
    """One intent. ``patterns`` are matched against the normalised message, in table order."""

    name: str
    summary: str
    examples: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]
    keywords: tuple[str, ...]  # for "did you mean"
    handler_path: str  # "module:function", imported lazily so the table stays import-light
    restricted: bool = False  # hidden from help for people who may not run it
    confirm: bool = False
    args: tuple[str, ...] = field(default_factory=tuple)

    def matches(self, text: str) -> bool:
        """True if any pattern matches the normalised text."""
        return any(p.search(text) for p in self.patterns)


def _p(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


# Order matters: the first command whose pattern matches wins, so specific intents come first.
COMMANDS: tuple[Command, ...] = (
    Command(
        name="restart",
        summary="restart a service (guarded: allowed people only, with a confirmation)",
        examples=("restart kimi", "/inferbot restart kimi"),
        patterns=_p(r"^(please\s+)?(re-?start|bounce|reboot)\b", r"\brestart\s+\S+"),
        keywords=("restart", "bounce"),
        handler_path="handlers.restart:handle",
        restricted=True,
        confirm=True,
        args=("force",),
    ),
    # --- charts (issue 13): before "throughput", whose words (throughput, bench) they contain ---------
    Command(
        name="chart_loads",
        summary="a chart of the last loads of a service, split by phase, with today's ETA basis",
        examples=("chart loads kimi",),
        patterns=_p(r"\b(chart|graph|plot)s?\b.*\bloads?\b", r"\bloads?\b.*\b(chart|graph|plot)\b"),
        keywords=("chart", "graph", "plot"),
        handler_path="handlers.charts:loads",
        args=("window_s",),
    ),
    Command(
        name="chart_bench",
        summary="a chart of single-stream and peak benchmark throughput over the benchmark dates",
        examples=("chart bench kimi",),
        patterns=_p(r"\b(chart|graph|plot)s?\b.*\bbench(mark)?s?\b", r"\bbench(mark)?s?\b.*\b(chart|graph|plot)\b"),
        keywords=("chart", "graph", "plot"),
        handler_path="handlers.charts:bench",
    ),
    Command(
        name="chart_throughput",
        summary="a chart of tok/s and requests over time (default the last 24 h; up to 7 d), restarts marked",
        examples=("chart throughput kimi", "throughput kimi chart last 6h", "chart throughput kimi 7d"),
        patterns=_p(r"\b(chart|graph|plot)s?\b"),
        keywords=("chart", "graph", "plot"),
        handler_path="handlers.charts:throughput",
        args=("window_s",),
    ),
    # --- end of charts ---------------------------------------------------------------------------------
    Command(
        name="logs",
        summary="the last lines of a service's journal (default 30, at most 200)",
        examples=("logs kimi", "logs kimi 100"),
        patterns=_p(r"^(show\s+)?(the\s+)?(logs?|journal)\b", r"\b(logs?|journal)\s+(for|of|on)\b"),
        keywords=("logs", "journal"),
        handler_path="handlers.logs:handle",
        args=("lines",),
    ),
    Command(
        name="compare",
        summary="side-by-side settings of two services, or one service on two nodes",
        examples=("compare kimi and qwen", "compare kimi on gpu-a and gpu-b"),
        patterns=_p(r"^(compare|diff)\b.+\b(and|vs\.?|with|to)\b"),
        keywords=("compare",),
        handler_path="handlers.changes:compare",
    ),
    Command(
        name="changes",
        summary="what changed in a service's settings, and when",
        examples=("what changed on kimi?", "diff kimi"),
        patterns=_p(r"\bwhat('?s| has| have)?\s+changed\b", r"^(diff|changes)\b", r"\bchanges?\s+(on|for|to)\b"),
        keywords=("changed", "diff", "changes"),
        handler_path="handlers.changes:handle",
    ),
    Command(
        name="audit",
        summary="the audit log: restart requests, refusals, confirmations, outcomes",
        examples=("audit", "history kimi"),
        patterns=_p(r"^(audit|history)\b", r"\baudit\s+log\b"),
        keywords=("audit", "history"),
        handler_path="handlers.audit:handle",
    ),
    Command(
        name="gpus",
        summary="GPU memory, utilisation, temperature, power and the processes holding them",
        examples=("gpu status", "gpus on gpu-a"),
        patterns=_p(r"\bgpus?\b(?!-)(?!\s+(memory\s+)?util)", r"\bnvidia-smi\b", r"\bvram\b"),
        keywords=("gpus", "gpu", "nvidia-smi"),
        handler_path="handlers.gpus:handle",
    ),
    Command(
        name="throughput",
        summary="live tokens/s, latency percentiles and the latest benchmark results",
        examples=("throughput", "how fast is kimi?", "tok/s"),
        patterns=_p(r"\bthroughput\b", r"\bhow\s+fast\b", r"\btok(en)?s?\s*/\s*s(ec)?\b", r"\btps\b",
                    r"\bbench(mark)?s?\b", r"\bspeed\b", r"\blatency\b", r"\bperformance\b"),
        keywords=("throughput", "fast", "tok/s", "benchmark", "speed"),
        handler_path="handlers.throughput:handle",
    ),
    Command(
        name="status",
        summary="state, uptime, load progress with ETA, requests and KV cache",
        examples=("status", "is kimi up?", "is it ready yet?"),
        patterns=_p(r"\bstatus\b", r"^is\b.*\b(up|ready|down|alive|running|loaded|loading|healthy|done)\b",
                    r"\bready\s+yet\b", r"\bhow\s+long\b", r"\beta\b", r"\bprogress\b", r"\bhealth\b",
                    r"\bstate\b", r"\buptime\b"),
        keywords=("status", "up", "ready", "progress", "health"),
        handler_path="handlers.status:handle",
    ),
    Command(
        name="settings",
        summary="the live vLLM flags, model, environment (NCCL/CUDA/…), version, GPUs and warnings",
        examples=("what are current settings?", "show config for kimi", "what flags is kimi running with",
                  "nccl env on gpu-a", "which model is on gpu-a"),
        patterns=_p(r"\bsettings?\b", r"\bconfig(uration)?\b", r"\bflags?\b", r"\bargs?\b", r"\barguments\b",
                    r"\benv(ironment)?\b", r"\bnccl\b", r"\bcuda\b", r"\bmodels?\b", r"\bparams?\b",
                    r"\bparameters\b", r"\bcommand\s*line\b", r"\bsetup\b", r"\bvars?\b"),
        keywords=("settings", "config", "flags", "env", "nccl", "model"),
        handler_path="handlers.settings:handle",
    ),
    Command(
        name="help",
        summary="what I can answer, with examples",
        examples=("help",),
        patterns=_p(r"^(help|\?|commands|usage|what can you do)\b", r"^h$"),
        keywords=("help",),
        handler_path="handlers.help:handle",
    ),
)


def command(name: str) -> Command:
    """The command called ``name``."""
    for c in COMMANDS:
        if c.name == name:
            return c
    raise KeyError(name)
