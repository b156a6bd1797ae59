"""The command table: the one source of truth for every intent (patterns, examples, help, guard).

It belongs to the handler layer and holds the handler functions themselves; the router (``bot/``) reads
it, ``bot/dispatch.py`` calls ``command.handler`` by reference.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from handlers import (
    audit,
    bench_run,
    changes,
    charts,
    gpus,
    logs,
    restart,
    restart_info,
    settings,
    silence,
    status,
    throughput,
)
from handlers import help as help_handler
from handlers.context import Context, Request
from handlers.reply import Reply
from services.parse.vllm_args import FLAG_GROUPS, KNOWN_SWITCHES, MULTI_VALUE_FLAGS, SHORT_ALIASES

Handler = Callable[[Context, Request], Awaitable[Reply]]


@dataclass(frozen=True)
class Command:
    """One intent. ``patterns`` are matched against the normalised message, in table order."""

    name: str
    summary: str
    examples: tuple[str, ...]
    patterns: tuple[re.Pattern[str], ...]
    keywords: tuple[str, ...]  # for "did you mean"
    handler: Handler  # called by reference: a reader (and a tool) can follow the hop
    restricted: bool = False  # hidden from help for people who may not run it
    confirm: bool = False
    args: tuple[str, ...] = field(default_factory=tuple)

    def matches(self, text: str) -> bool:
        """True if any pattern matches the normalised text."""
        return any(p.search(text) for p in self.patterns)


def _p(*patterns: str) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p) for p in patterns)


# The verbs that start a restart. Every restart pattern below is built from this one alternation, so a
# new verb is a request in the imperative and a question or a negation everywhere else at once.
RESTART_VERB = r"(?:re-?start|bounce|reboot)"
_LEAD = r"^(?:(?:hey|hi|ok|okay|so|and|but|now|then|um|hmm|quick\s+question)\b[\s,]*)*"
# A polite imperative ("can you restart kimi", "please restart kimi") is a request: it still needs the
# confirmation, like "restart kimi". A question about restarting ("can I …", "should I …") is not.
_POLITE = r"(?:(?:please|pls|plz|kindly)\s+|(?:can|could|would|will)\s+(?:you|u)\s+(?:please\s+|pls\s+)?)*"
RESTART_REQUEST = re.compile(_LEAD + _POLITE + RESTART_VERB + r"\b(?!-)")
# Negations: "don't restart kimi", "never restart kimi", "kimi must not be restarted".
RESTART_NEGATION = re.compile(
    r"\b(?:don'?t|dont|do\s+not|never|no\s+need\s+to|stop|shouldn'?t|should\s+not|mustn'?t|must\s+not|"
    r"won'?t|will\s+not|can'?t|cannot|can\s+not|avoid|not)\b.*\b" + RESTART_VERB
)
_QUESTION_START = (
    r"(?:why|when|who|whom|whose|how|what|which|where|did|does|do|has|have|had|was|were|is|are|should|"
    r"shall|may|might|would\s+(?:it|that|this|a)|(?:can|could)\s+(?:i|we|someone|anyone|somebody|he|she|they|"
    r"my|our|it)|will\s+(?:it|that|this|a|the))\b"
)
RESTART_QUESTION = (
    _LEAD + _QUESTION_START + r".*\b" + RESTART_VERB,  # "why did kimi restart", "who can restart kimi"
    r"\b" + RESTART_VERB + r"(?:s|ed|ing|es)\b",  # "kimi restarted?", "restarts of kimi today"
    r"\b(?:bounced|bouncing|rebooted|rebooting)\b",
    r"\b" + RESTART_VERB + r"\s+(?:history|log|logs|count|counts|times|record|records|events|policy|"
    r"permissions?|rights?|access)\b",
    r"\b(?:last|latest|recent|previous|next)\s+" + RESTART_VERB,
)


def _flag_names() -> tuple[str, ...]:
    """vLLM's canonical long flag names (read-only use of services.parse.vllm_args' tables)."""
    names = {p for _, pats in FLAG_GROUPS for p in pats if "*" not in p}
    names |= KNOWN_SWITCHES | MULTI_VALUE_FLAGS | set(SHORT_ALIASES.values())
    return tuple(sorted(names, key=len, reverse=True))  # longest first: "max-model-len" before "max"


FLAG_NAMES = _flag_names()
# Words that name a flag are never a service: "tensor parallel size of kimi" names kimi only.
FLAG_WORDS = frozenset(w for n in FLAG_NAMES for w in n.split("-")) | frozenset(SHORT_ALIASES)
# A flag is mentioned when written as a flag ("--max-model-len", "-tp"), or as its words in a row
# ("gpu memory utilization", "tensor_parallel_size") — single-word names only when written as flags,
# or the plain word is unambiguous ("host" and "port" stay ordinary words).
_SPELLED = [n for n in FLAG_NAMES if "-" in n] + ["quantization", "dtype", "seed", "tokenizer", "revision"]
FLAG_MENTION = re.compile(
    r"(?:(?<![\w-])--(?P<dashed>[a-z][a-z0-9-]*[a-z0-9]))"
    r"|(?:(?<![\w-])-(?P<short>" + "|".join(sorted(SHORT_ALIASES, key=len, reverse=True)) + r")\b(?!-))"
    r"|(?:(?<![\w-])(?P<spelled>" + "|".join(re.escape(n).replace(r"\-", "[-_ ]") for n in _SPELLED) + r")(?![\w-]))"
)


def mentioned_flag(text: str) -> str | None:
    """The canonical name of the vLLM flag ``text`` asks about (normalised text), or None."""
    m = FLAG_MENTION.search(text)
    if m is None:
        return None
    if m.group("short"):
        return SHORT_ALIASES[m.group("short")]
    return re.sub(r"[_ ]", "-", m.group("dashed") or m.group("spelled"))


async def _help(ctx: Context, req: Request) -> Reply:
    """Help over this table (the help module takes the table as a parameter, so it never imports it)."""
    return await help_handler.answer(COMMANDS, ctx, req)


# Order matters: the first command whose pattern matches wins, so specific intents come first.
COMMANDS: tuple[Command, ...] = (
    # First: the reason after the duration is free text ("silence kimi 2h restart planned") and must not
    # pick another command.
    Command(
        name="unsilence",
        summary="end a silence now: notices of the service are posted again (allowed people only; audited)",
        examples=("unsilence kimi",),
        patterns=_p(r"^(please\s+)?(unsilence|un-silence|unmute)\b"),
        keywords=("unsilence", "unmute"),
        handler=silence.handle_unsilence,
        restricted=True,
    ),
    Command(
        name="silence",
        summary="hold back a service's unplanned-restart, unhealthy and hung notices for a while (planned work; "
                "allowed people only; audited)",
        examples=("silence kimi 2h planned driver update",),
        patterns=_p(r"^(please\s+)?(silence|mute)\b"),
        keywords=("silence", "mute"),
        handler=silence.handle_silence,
        restricted=True,
        args=("duration_s", "reason"),
    ),
    # Before the restart commands: "clear the restart lock on kimi" names a lock, not a restart.
    Command(
        name="unlock",
        summary="show and clear a stale restart lock (allowed people only; audited)",
        examples=("unlock kimi", "clear the restart lock on kimi"),
        patterns=_p(r"^(please\s+)?unlock\b", r"\bclear\s+(the\s+)?(stale\s+)?(restart\s+)?lock\b"),
        keywords=("unlock", "lock", "clear", "stale"),
        handler=restart.handle_unlock,
        restricted=True,
    ),
    # Before "restart": a question or a negation that mentions restarting never starts one.
    Command(
        name="restarts",
        summary="when a service last restarted (audit log and systemd's count), who may restart it, and how",
        examples=("why did kimi restart last night?", "who can restart kimi?", "restart history"),
        patterns=(RESTART_NEGATION, *_p(*RESTART_QUESTION)),
        keywords=("restarts", "restarted"),
        handler=restart_info.handle,
    ),
    Command(
        name="restart",
        summary="restart a service (guarded: allowed people only, with a confirmation)",
        examples=("restart kimi", "please restart kimi on gpu-a", "/inferbot restart kimi"),
        patterns=(RESTART_REQUEST,),
        keywords=("restart", "bounce"),
        handler=restart.handle,
        restricted=True,
        confirm=True,
        args=("force",),
    ),
    # Issue 14: "bench kimi" runs the acceptance benchmark (a request, not a question about results).
    Command(
        name="bench",
        summary="run the acceptance benchmark on a service (guarded like a restart: allowed people, a confirmation)",
        examples=("bench kimi", "run a benchmark on kimi"),
        patterns=_p(r"^(?:please\s+)?(?:bench|run\s+(?:a\s+|an\s+|the\s+)?(?:acceptance\s+)?bench(?:mark)?)\b"
                    r"(?!.*\b(?:chart|graph|plot|results?|numbers?|history)\b)"),
        keywords=("bench",),
        handler=bench_run.handle,
        restricted=True,
        confirm=True,
    ),
    # --- charts (issue 13): before "throughput", whose words (throughput, bench) they contain ---------
    Command(
        name="chart_loads",
        summary="a chart of the last loads of a service, split by phase, with today's ETA basis",
        examples=("chart loads kimi",),
        patterns=_p(r"\b(chart|graph|plot)s?\b.*\bloads?\b", r"\bloads?\b.*\b(chart|graph|plot)\b"),
        keywords=("chart", "graph", "plot", "loads", "charts"),
        handler=charts.loads,
        args=("window_s",),
    ),
    Command(
        name="chart_bench",
        summary="a chart of single-stream and peak benchmark throughput over the benchmark dates",
        examples=("chart bench kimi",),
        patterns=_p(r"\b(chart|graph|plot)s?\b.*\bbench(mark)?s?\b", r"\bbench(mark)?s?\b.*\b(chart|graph|plot)\b"),
        keywords=("chart", "graph", "plot"),
        handler=charts.bench,
    ),
    Command(
        name="chart_throughput",
        summary="a chart of tok/s and requests over time (default the last 24 h; up to 7 d), restarts marked",
        examples=("chart throughput kimi", "throughput kimi chart last 6h", "chart throughput kimi 7d"),
        patterns=_p(r"\b(chart|graph|plot)s?\b"),
        keywords=("chart", "graph", "plot"),
        handler=charts.throughput,
        args=("window_s",),
    ),
    # --- end of charts ---------------------------------------------------------------------------------
    Command(
        name="logs",
        summary="the last lines of a service's journal (default 30, at most 200)",
        examples=("logs kimi", "logs kimi 100"),
        patterns=_p(r"^(show\s+)?(the\s+)?(logs?|journal)\b", r"\b(logs?|journal)\s+(for|of|on)\b"),
        keywords=("logs", "journal"),
        handler=logs.handle,
        args=("lines",),
    ),
    Command(
        name="compare",
        summary="side-by-side settings of two services, or one service on two nodes",
        examples=("compare kimi and qwen", "compare kimi on gpu-a and gpu-b"),
        patterns=_p(r"^(compare|diff)\b.+\b(and|vs\.?|with|to)\b"),
        keywords=("compare",),
        handler=changes.compare,
    ),
    Command(
        name="changes",
        summary="what changed in a service's settings, and when",
        examples=("what changed on kimi?", "diff kimi"),
        patterns=_p(r"\bwhat('?s| has| have)?\s+changed\b", r"^(diff|changes)\b", r"\bchanges?\s+(on|for|to)\b"),
        keywords=("changed", "diff", "changes"),
        handler=changes.handle,
    ),
    Command(
        name="audit",
        summary="the audit log: restart requests, refusals, confirmations, outcomes",
        examples=("audit", "history kimi"),
        patterns=_p(r"^(audit|history)\b", r"\baudit\s+log\b"),
        keywords=("audit", "history"),
        handler=audit.handle,
    ),
    # Before "gpus": "gpu memory utilization of kimi" is the flag, "gpu memory" the GPUs.
    Command(
        name="flag",
        summary="the value of one vLLM flag on each service (its settings, focused on that flag)",
        examples=("what's --max-model-len on kimi", "what is the gpu-memory-utilization of kimi",
                  "tensor parallel size of kimi"),
        patterns=(FLAG_MENTION,),
        keywords=("flag",),
        handler=settings.handle,
    ),
    Command(
        name="gpus",
        summary="GPU memory, utilisation, temperature, power and the processes holding them",
        examples=("gpu status", "gpus on gpu-a", "what's the gpu utilization on gpu-a", "vram"),
        patterns=_p(r"\bgpus?\b(?!-)", r"\bnvidia-smi\b", r"\bvram\b", r"\butili[sz]ation\b", r"\butil\b"),
        keywords=("gpus", "gpu", "nvidia-smi"),
        handler=gpus.handle,
    ),
    Command(
        name="throughput",
        summary="live tokens/s, latency percentiles and the latest benchmark results",
        examples=("throughput", "how fast is kimi?", "tok/s"),
        patterns=_p(r"\bthroughput\b", r"\bhow\s+fast\b", r"\btok(en)?s?\s*/\s*s(ec)?\b", r"\btps\b",
                    r"\bbench(mark)?s?\b", r"\bspeed\b", r"\blatency\b", r"\bperformance\b"),
        keywords=("throughput", "fast", "tok/s", "benchmark", "speed"),
        handler=throughput.handle,
    ),
    Command(
        name="status",
        summary="state, uptime, load progress with ETA, requests and KV cache",
        examples=("status", "is kimi up?", "is it ready yet?"),
        patterns=_p(r"\bstatus\b", r"^is\b.*\b(up|ready|down|alive|running|loaded|loading|healthy|done)\b",
                    r"\bready\s+yet\b", r"\bhow\s+long\b", r"\beta\b", r"\bprogress\b", r"\bhealth\b",
                    r"\bstate\b", r"\buptime\b", r"\brequests?\b", r"\bkv\s*cache\b", r"\bqueued?\b"),
        keywords=("status", "up", "ready", "progress", "health"),
        handler=status.handle,
    ),
    Command(
        name="settings",
        summary="the live vLLM flags, model, environment (NCCL/CUDA/…), version, GPUs and warnings",
        examples=("what are current settings?", "show config for kimi", "what flags is kimi running with",
                  "nccl env on gpu-a", "which model is on gpu-a"),
        patterns=_p(r"\bsettings?\b", r"\bconfig(uration)?\b", r"\bflags?\b", r"\bargs?\b", r"\barguments\b",
                    r"\benv(ironment)?\b", r"\bnccl\b", r"\bcuda\b", r"\bmodels?\b", r"\bparams?\b",
                    r"\bparameters\b", r"\bcommand\s*line\b", r"\bsetup\b", r"\bvars?\b", r"\bversions?\b"),
        keywords=("settings", "config", "flags", "env", "nccl", "model"),
        handler=settings.handle,
    ),
    Command(
        name="help",
        summary="what I can answer, with examples",
        examples=("help",),
        patterns=_p(r"^(help|\?|commands|usage|what can you do)\b", r"^h$"),
        keywords=("help",),
        handler=_help,
    ),
)


def command(name: str) -> Command:
    """The command called ``name``."""
    for c in COMMANDS:
        if c.name == name:
            return c
    raise KeyError(name)

