"""The command table: the one source of truth for every intent (its words, examples, help, guard, handler).

It belongs to the handler layer and holds the handler functions themselves; the router (``bot/``) reads
it — each command's ``words`` are what the scorer looks for, ``args`` the typed arguments it reads —
and ``bot/dispatch.py`` calls ``command.handler`` by reference.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

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
    smalltalk,
    status,
    throughput,
)
from handlers import help as help_handler
from handlers.change import kind as change
from handlers.context import Context, Request
from handlers.reply import Reply

Handler = Callable[[Context, Request], Awaitable[Reply]]
ArgName = Literal["lines", "window_s", "force", "focus", "flag", "env", "duration_s", "reason", "negated", "change"]
Family = Literal["restart", "bench", "silence", "unlock", "chart", "change"] | None


@dataclass(frozen=True)
class Vocabulary:
    """How people name an intent: words or phrases (matched by their stems, anywhere in the message).

    ``strong`` words name the intent on their own ("logs"), ``medium`` ones lean towards it ("errors"),
    ``weak`` ones only tip a tie ("fast" after "how"). Other languages reach these words through the
    router's lexicons.
    """

    strong: tuple[str, ...] = ()
    medium: tuple[str, ...] = ()
    weak: tuple[str, ...] = ()


@dataclass(frozen=True)
class Command:
    """One intent: what it answers, how people ask for it, who may, and the handler that answers it."""

    name: str
    summary: str
    examples: tuple[str, ...]
    words: Vocabulary
    handler: Handler  # called by reference: a reader (and a tool) can follow the hop
    restricted: bool = False  # hidden from help for people who may not run it
    confirm: bool = False  # an order: it acts, after a confirmation (the router checks it is one)
    args: tuple[ArgName, ...] = field(default_factory=tuple)  # the typed arguments it reads
    family: Family = None  # orders and the questions about them share words ("restart" / "restarts")
    verbs: tuple[str, ...] = ()  # an order's verbs: one of them, in the imperative, makes the message an order
    hidden: bool = False  # not listed in help (small talk)


async def _help(ctx: Context, req: Request) -> Reply:
    """Help over this table (the help module takes the table as a parameter, so it never imports it)."""
    return await help_handler.answer(COMMANDS, ctx, req)


# The order is help's order after its everyday questions (handlers/help.py); the router scores every command.
COMMANDS: tuple[Command, ...] = (
    Command(
        name="unsilence",
        summary="end a silence now: notices of the service are posted again (allowed people only; audited)",
        examples=("unsilence kimi",),
        words=Vocabulary(strong=("unsilence", "un-silence", "unmute", "unsnooze", "un-mute", "alerts back on",
                                 "notices back on", "back on", "resume alerts", "resume notices", "end the silence",
                                 "lift the silence", "re-enable alerts", "enable alerts")),
        handler=silence.handle_unsilence,
        restricted=True,
        confirm=True,
        family="silence",
        verbs=("unsilence", "un-silence", "unmute", "un-mute", "unsnooze", "resume", "end", "lift", "turn",
               "re-enable", "reenable", "enable", "restore"),
    ),
    Command(
        name="silence",
        summary="hold back a service's unplanned-restart, unhealthy and hung notices for a while (planned work; "
                "allowed people only; audited)",
        examples=("silence kimi 2h planned driver update",),
        words=Vocabulary(strong=("silence", "mute", "shh", "shhh", "shush", "snooze", "hush", "squelch", "alerts off",
                                 "notices off", "disable alerts", "pause alerts", "stop alerting", "stop paging"),
                         medium=("quiet", "suppress", "=notices", "mute alerts", "turn off alerts",
                                 "turn alerts off", "stop the alerts", "no alerts", "hold alerts", "hold the alerts")),
        handler=silence.handle_silence,
        restricted=True,
        confirm=True,
        args=("duration_s", "reason"),
        family="silence",
        verbs=("silence", "mute", "shh", "shhh", "shush", "snooze", "hush", "squelch", "quiet", "suppress", "turn",
               "disable", "pause", "stop"),
    ),
    Command(
        name="unlock",
        summary="show and clear a stale restart lock (allowed people only; audited)",
        examples=("unlock kimi", "clear the restart lock on kimi"),
        words=Vocabulary(strong=("unlock", "restart lock", "stale lock", "clear the lock", "release the lock",
                                 "the lock", "holds the lock", "has the lock", "lock holder", "held the lock",
                                 "lock on", "is locked", "still locked", "locked up", "any locks", "locks",
                                 # the lock's state said of it ("kimi's restart lock is stuck since yesterday")
                                 "restart lock is stuck", "restart lock stuck", "lock is stuck", "lock stuck",
                                 "stuck lock", "lock is stale", "lock is hung", "lock hung"),
                         medium=("lock", "locked", "stale")),
        handler=restart.handle_unlock,
        restricted=True,
        confirm=True,
        family="unlock",
        verbs=("unlock", "clear", "release", "remove", "drop", "break", "delete"),
    ),
    Command(
        name="restarts",
        summary="when a service last restarted (audit log and systemd's count), who may restart it, and how",
        examples=("why did kimi restart last night?", "who can restart kimi?", "restart history"),
        words=Vocabulary(strong=("restart history", "restart count", "restarts", "restarted", "rebooted",
                                 "bounced", "last restart", "restart log", "nrestarts", "restart counter",
                                 "number of restarts", "how many restarts", "restart timeline", "restart policy",
                                 "restart loop", "restart storm", "crash loop", "crashloop", "restart reason",
                                 "restart schedule", "restart times", "restart events", "restart record",
                                 "restart stats", "restart rate", "restart frequency", "auto restart",
                                 "automatically restart", "restarts automatically", "bring it back",
                                 "brings it back", "bring back", "by itself", "on its own", "go down and come back",
                                 "went down and came back", "gone down and come back", "process start",
                                 "process started", "start time", "last started", "running since", "up since",
                                 "relaunched", "respawned", "kicked", "recycled", "how long would",
                                 "come back by itself", "come back on its own", "come back automatically",
                                 "back up by itself", "back up on its own", "restart automatically"),
                         medium=("who may", "who can", "allowed to", "permission", "safe", "=times", "how often",
                                 "overnight", "last night", "downside", "unplanned", "cooldown", "cool down",
                                 "ok to restart", "okay to restart", "is it ok to restart", "is it safe to restart",
                                 "is it fine to restart", "fine to restart", "alright to restart",
                                 "until i can restart", "before i can restart", "until we can restart",
                                 "restart cooldown", "rate limit")),
        handler=restart_info.handle,
        args=("negated",),
        family="restart",
    ),
    Command(
        name="restart",
        summary="restart a service (guarded: allowed people only, with a confirmation)",
        examples=("restart kimi", "please restart kimi on gpu-a", "/inferbot restart kimi"),
        words=Vocabulary(strong=("restart", "bounce", "reboot", "re-start", "kick", "recycle", "respawn",
                                 "restarting", "neustart", "relaunch", "re-launch"),
                         medium=("cycle", "start again", "reload", "reinit", "reinitialize")),
        handler=restart.handle,
        restricted=True,
        confirm=True,
        args=("force",),
        family="restart",
        verbs=("restart", "bounce", "reboot", "re-start", "kick", "recycle", "respawn", "cycle", "relaunch", "reload",
               "reinit", "reinitialize"),
    ),
    Command(
        name="change",
        summary="change a service's flags or environment (guarded like a restart: a preflight and a preview first; "
                "kept when it loads and stays healthy, rolled back otherwise)",
        examples=("set max-num-seqs 256 on kimi", "unset --enforce-eager on kimi", "set env NCCL_PROTO=Simple on kimi",
                  "change kimi: --max-model-len 65536 --max-num-seqs 128"),
        words=Vocabulary(strong=("unset",)),
        handler=change.handle_change,
        restricted=True,
        confirm=True,
        args=("change",),
        family="change",
        verbs=("set", "unset", "change"),
    ),
    Command(
        name="revert",
        summary="back to the operator's unit: remove inferbot's settings drop-in (guarded like a restart)",
        examples=("revert kimi",),
        words=Vocabulary(strong=("revert",)),
        handler=change.handle_revert,
        restricted=True,
        confirm=True,
        family="change",
        verbs=("revert",),
    ),
    Command(
        name="bench",
        summary="run the acceptance benchmark on a service (guarded like a restart: allowed people, a confirmation)",
        examples=("bench kimi", "run a benchmark on kimi"),
        words=Vocabulary(strong=("bench", "benchmark", "acceptance bench", "acceptance test", "benchmarking"),
                         medium=("=acceptance", "smoke test", "load test")),
        handler=bench_run.handle,
        restricted=True,
        confirm=True,
        family="bench",
        verbs=("bench", "benchmark", "run", "rerun", "re-run", "start", "launch", "trigger", "kick", "do", "fire"),
    ),
    Command(
        name="chart_loads",
        summary="a chart of the last loads of a service, split by phase, with today's ETA basis",
        examples=("chart loads kimi",),
        words=Vocabulary(strong=("load times", "load time", "load durations", "load history", "how long did",
                                 "take to load", "took to load", "how long loads take"),
                         medium=("loads", "phases")),
        handler=charts.loads,
        args=("window_s",),
        family="chart",
    ),
    Command(
        name="chart_bench",
        summary="a chart of single-stream and peak benchmark throughput over the benchmark dates",
        examples=("chart bench kimi",),
        words=Vocabulary(strong=("bench", "benchmark", "benchmarks", "bench history", "bench numbers", "bench results",
                                 "benchmark results"),
                         medium=("single stream", "peak")),
        handler=charts.bench,
        family="chart",
    ),
    Command(
        name="chart_throughput",
        summary="a chart of tok/s and requests over time (default the last 24 h; up to 7 d), restarts marked",
        examples=("chart throughput kimi", "throughput kimi chart last 6h", "chart throughput kimi 7d"),
        words=Vocabulary(strong=("throughput", "tok/s", "tokens per second", "tps", "thruput"),
                         medium=("requests", "speed", "traffic")),
        handler=charts.throughput,
        args=("window_s",),
        family="chart",
    ),
    Command(
        name="logs",
        summary="the last lines of a service's journal (default 30, at most 200)",
        examples=("logs kimi", "logs kimi 100"),
        words=Vocabulary(strong=("logs", "log", "journal", "journalctl", "tail", "stderr", "stdout", "traceback",
                                 "logging", "log lines"),
                         medium=("errors", "error", "lines", "=exception", "stack trace", "output", "say", "=printing",
                                 "=print", "=printed", "=prints", "=emitted", "=logged", "saying", "spitting",
                                 "outputting"),
                         weak=("grab", "died", "crash", "crashed")),
        handler=logs.handle,
        args=("lines",),
    ),
    Command(
        name="compare",
        summary="side-by-side settings of two services, or one service on two nodes",
        examples=("compare kimi and qwen", "compare kimi on gpu-a and gpu-b"),
        words=Vocabulary(strong=("compare", "comparison", "side by side", "versus", "vs", "differ from",
                                 "differently from", "difference between", "differences between", "diff between",
                                 "the same", "same as", "line up", "lined up", "juxtapose", "contrast",
                                 "differ in", "=differences", "mismatch", "mismatched", "in sync", "out of sync",
                                 "=identical", "same on both", "=consistent", "match", "configured like",
                                 "set up like", "configured the same", "same config as", "same flags as",
                                 "same settings as"),
                         medium=("differ", "differently", "two models", "two services", "each other", "diff",
                                 "difference")),
        handler=changes.compare,
    ),
    Command(
        name="changes",
        summary="what changed in a service's settings, and when",
        examples=("what changed on kimi?", "diff kimi"),
        words=Vocabulary(strong=("what changed", "changed", "changes", "diff", "anything different", "drift",
                                 "modified", "touch", "touched", "last known good", "changelog", "what's different",
                                 "anything different in", "something different in",
                                 "anyone change", "someone change", "who changed", "did we change",
                                 "than before", "compared to before", "what's new", "whats new", "what is new",
                                 "anything new", "new since", "rollback", "roll back", "rolled back", "reverted",
                                 "before the change", "used to be", "previous config", "previous settings",
                                 "old config", "old settings", "diff against", "compared to yesterday",
                                 "since yesterday", "since last week", "settings before", "config before",
                                 "compared to last", "compared with last", "than yesterday", "than last",
                                 "been changed", "got changed", "bumped", "tweaked"),
                         medium=("change", "different", "redeploy", "redeployed", "edited", "last time", "new",
                                 "revert", "previously", "updated", "update"),
                         weak=("since",)),
        handler=changes.handle,
    ),
    Command(
        name="audit",
        summary="the audit log: restart requests, refusals, confirmations, outcomes",
        examples=("audit", "history kimi"),
        words=Vocabulary(strong=("audit", "audit log", "audit trail", "who ran what", "who did what", "with the bot",
                                 "through the bot", "via the bot", "asked the bot", "what did you do",
                                 "what have you done", "what have you", "you've done", "your activity",
                                 "activity log", "your activity log", "bot activity log",
                                 "your audit log", "your log", "your logs", "your history", "your actions",
                                 "bot actions", "bot activity", "bot log", "bot history", "commands did",
                                 "commands were run", "who ran", "who =used", "used the bot", "through you",
                                 "via you", "asked you", "refused", "refusals", "denied", "rejected", "who approved",
                                 "who cleared", "who silenced", "did the bot", "has the bot", "the bot touch",
                                 "did you touch", "who unsilenced", "who unlocked",
                                 "who muted", "silences set", "audit entries", "you did", "bot commands", "bot done",
                                 "bot did",
                                 "command history", "commands history", "history of commands"),
                         medium=("history", "trail", "ran", "did you", "have you", "actions", "=activity")),
        handler=audit.handle,
    ),
    Command(
        name="flag",
        summary="the value of one vLLM flag on each service (its settings, focused on that flag)",
        examples=("what's --max-model-len on kimi", "what is the gpu-memory-utilization of kimi",
                  "tensor parallel size of kimi"),
        words=Vocabulary(weak=("flag", "value", "set to", "=knob")),
        handler=settings.handle,
        args=("flag", "env"),
    ),
    Command(
        name="gpus",
        summary="GPU memory, utilisation, temperature, power and the processes holding them",
        examples=("gpu status", "gpus on gpu-a", "what's the gpu utilization on gpu-a", "vram"),
        words=Vocabulary(strong=("gpu", "gpus", "vram", "nvidia-smi", "smi", "gpu util", "gpu utilization",
                                 "gpu utilisation", "gpu memory", "gpu mem", "temps", "temperature", "power draw",
                                 "how hot", "hot", "gpu status", "gpus status", "gpu health", "gpu state",
                                 "leftover", "zombie", "enginecore", "hogging", "ecc", "ecc errors", "xid errors",
                                 "xid"),
                         medium=("utilization", "utilisation", "util", "memory", "mem", "power", "watts",
                                 "processes", "procs", "=holding", "free", "usage", "full", "idle", "blackwell",
                                 "blackwells", "h100", "h100s", "h200", "a100", "b200", "l40s", "rtx", "cards",
                                 "visible", "fans", "thermal")),
        handler=gpus.handle,
    ),
    Command(
        name="throughput",
        summary="live tokens/s, latency percentiles and the latest benchmark results",
        examples=("throughput", "how fast is kimi?", "tok/s"),
        words=Vocabulary(strong=("throughput", "thruput", "tok/s", "tokens per second", "tokens/s", "tps", "ttft",
                                 "req/s", "reqs/s", "requests per second",
                                 "itl", "tpot", "latency", "perf", "=performance", "speed", "how fast",
                                 "single stream", "generation", "bench results", "benchmark results", "sluggish",
                                 "slower", "faster", "tokens per sec", "tok per sec", "tokens a second", "tokens/sec",
                                 "tok/sec", "benchmark numbers", "bench numbers", "perf numbers",
                                 "time to first token", "first token", "time per output token", "per output token",
                                 "inter token latency", "token latency", "output tokens per second",
                                 "request throughput", "generation throughput", "prompt throughput",
                                 "decode throughput", "prefill throughput", "decode latency", "prefill latency",
                                 "e2e latency", "end to end latency", "t/s", "tk/s", "toks/s", "how quick",
                                 "how quickly", "response time", "response times", "qps", "rps",
                                 "requests per second", "req/s", "goodput", "tokens per sec", "peak throughput",
                                 "per second", "per sec", "tok per second", "toks per second",
                                 "request rate", "token rate", "tokens rate", "generation rate"),
                         medium=("fast", "slow", "numbers", "results", "peak", "concurrent", "concurrency",
                                 "generating", "p50", "p99", "p90", "p95", "tokens", "bench", "benchmark", "queueing",
                                 "decode", "prefill", "percentile", "median", "snappy", "latencies"),
                         weak=("requests",)),
        handler=throughput.handle,
    ),
    Command(
        name="status",
        summary="state, uptime, load progress with ETA, requests and KV cache",
        examples=("status", "is kimi up?", "is it ready yet?"),
        words=Vocabulary(strong=("status", "stauts", "state", "ready", "uptime", "eta", "progress", "health",
                                 "healthy", "unhealthy", "health check", "healthcheck", "outage", "outages", "sitrep",
                                 "status report", "all green", "all good", "we good", "everything good", "nominal",
                                 "=operational", "reachable", "unreachable", "flatlined", "flatline", "what's going on",
                                 "going on", "what's =happening", "what's up with", "something wrong", "degraded",
                                 "taking requests", "accepting requests", "send traffic", "readiness", "=liveness",
                                 "heartbeat", "warm yet", "warmed up", "booted", "starting up", "=initializing",
                                 "=initialising", "on fire", "red on the board", "all systems go", "red flags",
                                 "everything ok", "everything okay", "all ok", "all okay", "we ok", "is it ok",
                                 "good shape", "bad shape", "in shape", "looks ok", "looking ok", "incident",
                                 "incidents",
                                 "hung", "stuck", "alive", "loading", "up yet", "how long until",
                                 "how far along", "shards", "warming up", "come back", "back up", "responding",
                                 "wedged", "cuda graphs", "cuda graph", "compiling", "waiting for gpu memory",
                                 "waiting on gpu memory", "loading weights", "anything wrong",
                                 "anything broken", "anything down", "it look like", "things look like",
                                 "how does it look", "how do things look"),
                         medium=("up", "down", "back", "stable", "unstable", "steady", "settled", "=doing", "=looking",
                                 "running", "serving",
                                 "loaded", "load", "finished", "done", "survive", "broken", "fail", "failed", "oom",
                                 "phase", "compiling", "dead", "=active", "endpoint", "waiting", "idle", "503s", "503",
                                 "piling up", "traffic", "kv cache", "queue", "queued", "alarms", "alarm", "=alerts",
                                 "=firing", "fine", "normal", "limping", "sad", "problems", "=issues",
                                 "available", "online", "offline", "=working", "kaput", "503ing", "502ing", "500ing",
                                 "5xx", "500s", "502s", "504s", "green", "red", "warm", "=starting", "booting",
                                 "availability", "burning", "unresponsive", "=responsive", "=live",
                                 "=silenced", "=muted", "look like", "happy", "unhappy", "=pages", "=paging"),
                         weak=("check", "everything", "how", "anything", "still", "yet", "good", "ok", "okay",
                               "alright")),
        handler=status.handle,
    ),
    Command(
        name="settings",
        summary="the live vLLM flags, model, environment (NCCL/CUDA/…), version, GPUs and warnings",
        examples=("what are current settings?", "show config for kimi", "what flags is kimi running with",
                  "nccl env on gpu-a", "which model is on gpu-a"),
        words=Vocabulary(strong=("=settings", "=setting", "config", "configuration", "configured", "cfg", "conf",
                                 "flags", "args", "arguments", "params", "parameters", "env", "environment",
                                 "env vars", "command line", "cmdline", "execstart", "unit file",
                                 "environmentfile", "setup", "set up", "tuning", "running with", "untruncated",
                                 "which model", "what model", "configured with", "started with", "launched with",
                                 "vllm command", "serve command", "launch command", "start command", "serve line",
                                 "launch line", "cmd line", "argv", "invocation", "exec line", "launch args",
                                 "model path", "checkpoint path", "weights path", "which checkpoint",
                                 "what checkpoint", "model dir", "model directory", "knobs", "=options",
                                 "launch options", "startup options", "how is launched", "how was launched",
                                 "how is started", "how was started"),
                         medium=("nccl", "cuda", "version", "unit", "paste", "vars",
                                 "variables", "exact"),
                         weak=("show", "all", "full", "current", "everything", "model", "models", "dump")),
        handler=settings.handle,
        args=("focus",),
    ),
    Command(
        name="help",
        summary="what I can answer, with examples",
        examples=("help",),
        words=Vocabulary(strong=("=help", "--help", "what can you do", "=commands", "how do i use",
                                 "how does this work", "what do you do", "what can i ask", "syntax",
                                 "cheat sheet", "cheatsheet", "what does do", "what does mean", "do you speak",
                                 "do you understand", "which languages", "what languages", "docs",
                                 "=documentation", "command list", "list of commands", "can i ask", "how do i ask",
                                 "who made you", "who built you", "what are you", "tutorial",
                                 "how to use", "what can i say", "how does work", "explain", "what can you tell",
                                 "what do you know", "what can you answer", "what can you show", "capabilities",
                                 "what are you able", "what do you support", "what can this bot",
                                 "can the bot", "is the bot able", "can inferbot", "bot understand", "bot speak",
                                 "bot support", "what does the bot", "how does the bot", "how do you work",
                                 "how does inferbot", "how are you used", "are you a bot", "json output", "--json",
                                 "example of", "an example"),
                         medium=("use you", "out of you", "examples", "=json", "=guide", "faq", "ask you",
                                 "is there a way", "languages", "german", "french", "spanish", "chinese", "japanese")),
        handler=_help,
    ),
    Command(
        name="smalltalk",
        summary="thanks, greetings and emoji get a line back",
        examples=("thanks!",),
        words=Vocabulary(strong=("thanks", "thank you", "thx", "ty", "cheers", "hello", "hi", "hey", "good bot",
                                 "=nice", "great", "awesome", "=cool", "morning", "good morning", "ok cool",
                                 "=perfect", "sweet", "lol", "haha", "appreciated", "yo", "gm", "gn", "good night",
                                 "ping", "=bye", "goodbye", "=cya", "see ya", "see you", "gotta go", "good evening",
                                 "you're the best", "you rock", "the best", "good job", "well done", "nice one",
                                 "love it", "legend", "amazing", "brilliant", "tysm", "much appreciated", "kudos",
                                 "wassup", "whassup", "welcome back"),
                         medium=("ok", "okay", "good")),
        handler=smalltalk.handle,
        hidden=True,
    ),
)


def command(name: str) -> Command:
    """The command called ``name``."""
    for c in COMMANDS:
        if c.name == name:
            return c
    raise KeyError(name)

