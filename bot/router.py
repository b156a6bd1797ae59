"""Text → ``Intent``: normalise a message, pick a command from the table, resolve the services it names."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

from bot.commands import COMMANDS, Command
from config.models import BotConfig, Node, Service

MAX_MESSAGE = 2000
_MENTION = re.compile(r"<[@#!][^>]*>")
_SLACK_LINK = re.compile(r"<(?:https?://|mailto:)[^|>]*\|([^>]*)>")
_WORD = re.compile(r"[a-z0-9][a-z0-9._/-]*")
STOPWORDS = frozenset(
    "a an the is are was what whats what's which who how show me tell give list current currently now "
    "on for of in at with and or to it its it's running run being served serving yet please pls do does "
    "any all every our my your this that these those there here from by up down ready than vs versus "
    "get see check display whats config settings setting flags flag env environment model models nccl "
    "cuda status gpu gpus logs log journal throughput fast tok/s tokens changed change changes compare diff "
    "restart audit history help lines last latest recent speed latency benchmark bench benchmarks "
    "performance progress eta long health state uptime force yes no ok hi hello hey thanks thank you "
    "inferbot bot args arguments params parameters vars variables command line setup loaded loading "
    "done alive healthy quick quickly again same has have been s tps sec vram nvidia-smi memory util "
    "utilisation utilization usage info information detail details about into between both".split()
)
_WINDOW = re.compile(r"\b(\d{1,4})\s*(mins?|minutes?|m|h|hrs?|hours?|d|days?|w|weeks?)\b")
_WINDOW_UNIT = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_TARGET_CUE = re.compile(r"\b(?:for|on|of|restart|logs?|compare|history|is|and)\s+([a-z0-9][a-z0-9-]*)")


@dataclass
class Intent:
    """A routed message. ``error`` is set (and friendly) when the targets could not be resolved."""

    command: Command
    services: list[Service] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    explicit_target: bool = False
    args: dict[str, object] = field(default_factory=dict)
    unknown: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)
    matched: bool = True


def normalise(text: str) -> str:
    """Lower-case, strip Slack mentions/markup and punctuation; bounded length."""
    text = text[:MAX_MESSAGE]
    text = _SLACK_LINK.sub(r"\1", text)
    text = _MENTION.sub(" ", text)
    text = text.replace("\u2019", "'").lower()
    text = re.sub(r"[^\w\s/'?.-]", " ", text)
    text = text.replace("?", " ").strip(" .")
    return re.sub(r"\s+", " ", text).strip()


def _names(config: BotConfig) -> tuple[dict[str, list[Service]], dict[str, Node]]:
    services: dict[str, list[Service]] = {}
    for s in config.services:
        services.setdefault(s.name, []).append(s)
    nodes = {n.name: n for n in config.nodes}
    return services, nodes


def _match_name(token: str, names: list[str]) -> str | None:
    if token in names:
        return token
    # "kimi" picks "kimi-k25" when it is the only name starting that way.
    starts = [n for n in names if n.startswith(token + "-")]
    if len(token) >= 3 and len(starts) == 1:
        return starts[0]
    return None


def route(text: str, config: BotConfig) -> Intent:
    """Route ``text`` to a command and its targets. Never raises on garbage."""
    norm = normalise(text)
    cmd = next((c for c in COMMANDS if c.matches(norm)), None)
    matched = cmd is not None
    if cmd is None:
        cmd = next(c for c in COMMANDS if c.name == "help")
    services_by_name, nodes_by_name = _names(config)
    all_names = [*services_by_name, *nodes_by_name]
    tokens = _WORD.findall(norm)
    picked_services: list[Service] = []
    picked_nodes: list[Node] = []
    unknown: list[str] = []
    suggestions: list[str] = []
    for tok in tokens:
        tok = tok.strip("./")
        name = _match_name(tok, list(services_by_name))
        if name:
            picked_services += [s for s in services_by_name[name] if s not in picked_services]
            continue
        name = _match_name(tok, list(nodes_by_name))
        if name:
            if nodes_by_name[name] not in picked_nodes:
                picked_nodes.append(nodes_by_name[name])
            continue
    # Words in a target position that are not names we know: say so instead of guessing.
    for m in _TARGET_CUE.finditer(norm):
        tok = m.group(1)
        if tok in STOPWORDS or tok.isdigit() or _match_name(tok, all_names):
            continue
        unknown.append(tok)
        suggestions += difflib.get_close_matches(tok, all_names, n=2, cutoff=0.6)
    args: dict[str, object] = {}
    nums = [int(t) for t in tokens if t.isdigit() and len(t) <= 6]
    if nums:
        args["lines"] = nums[-1]
    # Charts: the time window ("last 6h", "24 h", "7d", "90 min").
    window = _WINDOW.search(norm)
    if window:
        args["window_s"] = int(window.group(1)) * _WINDOW_UNIT[window.group(2)[0]]
    if re.search(r"\bforce\b", norm):
        args["force"] = True
    if re.search(r"\bnccl\b", norm):
        args["focus"] = "nccl"
    elif re.search(r"\b(env|environment|vars?|variables)\b", norm):
        args["focus"] = "env"
    elif re.search(r"\bwhich\s+model|\bwhat\s+model\b|\bmodels?\s+(is|are)\b", norm):
        args["focus"] = "model"
    elif re.search(r"\bflags?\b|\bargs?\b|\barguments\b", norm):
        args["focus"] = "flags"
    if not matched:
        words = [t for t in tokens if t not in all_names]
        keywords = sorted({k for c in COMMANDS for k in c.keywords})
        for w in words:
            suggestions += [f"{k}" for k in difflib.get_close_matches(w, keywords, n=1, cutoff=0.75)]
    # Only the services on the named nodes (or the named services) are targets; none named → all.
    services: list[Service]
    if picked_services or picked_nodes:
        node_names = {n.name for n in picked_nodes}
        services = list(picked_services)
        if node_names:
            on_nodes = [s for s in config.services if s.node in node_names]
            services = [s for s in services if s.node in node_names] if picked_services else on_nodes
        nodes = [n for n in config.nodes if n.name in node_names or any(s.node == n.name for s in services)]
        explicit = True
    else:
        services = list(config.services)
        nodes = list(config.nodes)
        explicit = False
    return Intent(
        command=cmd, services=services, nodes=nodes, explicit_target=explicit, args=args,
        unknown=list(dict.fromkeys(unknown)), suggestions=list(dict.fromkeys(suggestions)), matched=matched,
    )
