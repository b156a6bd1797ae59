"""Text → ``Intent``: normalise a message, pick a command from the table, resolve the services it names."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from config.models import BotConfig, Node, Service
from handlers.commands import COMMANDS, FLAG_MENTION, FLAG_WORDS, RESTART_NEGATION, Command, mentioned_flag
from handlers.context import ArgValue
from handlers.silence_text import split_silence

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
    "utilisation utilization usage info information detail details about into between both "
    # English that is never a name: question words, auxiliaries, pronouns, time words, restart words.
    "why when where whom whose can could would will shall should may might must did doing had am were be "
    "i we they he she them us him her his their someone anyone somebody anybody people person everyone "
    "don t didn doesn isn wasn won shouldn can't cannot not never stop avoid ll re ve d m "
    "restarts restarted restarting bounce bounced bouncing reboot rebooted rebooting re-start allowed "
    "allow permission permissions rights access who's night overnight tonight today yesterday morning "
    "evening afternoon week weekend day days hour hours minute minutes mins min second seconds ago since "
    "earlier later lately recently before after then so far ever times time many much often count number "
    "happened happen happening cause caused reason crash crashed crashing died fail failed failing "
    "broken wrong problem issue error errors working work works look looks like seems well too also only "
    "very some one two new old first next previous value values set size need want know let lets way "
    "service services node nodes server servers cluster machine box vllm unit systemd systemctl "
    "configuration commands usage kindly just really more less ok okay sure something anything nothing "
    "if but because as out off over under each other such own nor u plz "
    "compared against differ difference different up-to-date until till version versions request requests "
    "queue queued waiting slow slower faster kv cache safe unsafe fine good bad better worse best worst "
    "keep keeps kept still going gone left right wait waiting happy sorry guys team folks anyone's "
    "mean means meant reason reasons explain tell said say says asked ask asking try trying tried think "
    "guess maybe perhaps probably possible possibly likely actually currently right-now asap soon "
    "morning tomorrow noon midnight hourly daily weekly month months year years lot lots little bit "
    "p50 p90 p95 p99 ttft itl tpot rps qps fp8 fp16 bf16 int4 int8 awq gptq nvfp4 h100 h200 a100 b200 l40s "
    "rtx blackwell hopper ampere workstation edition nvidia temperature temp power watts hot "
    "dont doesnt didnt isnt wasnt wont shouldnt cant use uses used using mem ram "
    "why's how's where's when's that's there's here's it'll i'm i've we're you're they're".split()
)
_SHELL_TAIL = re.compile(r"[;`|&$(){}<>\n]")
_NUMBER = re.compile(r"^v?\d+(?:\.\d+)*%?$|^\d+(?:st|nd|rd|th|x|k|gb|gib|mb|mib)$")
_DURATION = re.compile(r"^\d+(?:\.\d+)?(?:s|sec|secs|m|min|mins|h|hr|hrs|d|w|ms)$")
_WINDOW = re.compile(r"\b(\d{1,4})\s*(mins?|minutes?|m|h|hrs?|hours?|d|days?|w|weeks?)\b")
_WINDOW_UNIT = {"m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass
class Intent:
    """A routed message. ``error`` is set (and friendly) when the targets could not be resolved."""

    command: Command
    services: list[Service] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    explicit_target: bool = False
    args: dict[str, ArgValue] = field(default_factory=dict)
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


Aliases = Mapping[str, Sequence[Service]]


def service_aliases(config: BotConfig, served: Mapping[tuple[str, str], Sequence[str]] | None = None) -> dict[
        str, list[Service]]:
    """Other names people type for a service: its unit (with and without ``.service``), and the served
    model names and model paths (and their basenames) in ``served`` (``(service, node)`` → names, e.g.
    from the last snapshots in the store). Keys are lower-case, without a leading ``/``."""
    out: dict[str, list[Service]] = {}
    # Configured services are distinct (one name per node), so identity tells them apart: a membership test by
    # equality compared whole pydantic models, quadratic in a fleet whose nodes all run the same unit.
    seen: set[tuple[str, int]] = set()

    def add(alias: str, svc: Service) -> None:
        key = alias.strip().lower().strip("/")
        if key and (key, id(svc)) not in seen:
            seen.add((key, id(svc)))
            out.setdefault(key, []).append(svc)

    for svc in config.services:
        add(svc.unit, svc)
        add(svc.unit.removesuffix(".service"), svc)
        for name in (served or {}).get((svc.name, svc.node), ()):
            add(name, svc)
            add(name.rstrip("/").rsplit("/", 1)[-1], svc)
    return out


def _keywords() -> frozenset[str]:
    return frozenset(k for c in COMMANDS for k in c.keywords) | frozenset(c.name for c in COMMANDS)


_KEYWORDS = _keywords()


def _not_a_target(tok: str) -> bool:
    """Words that can never be a service or node: English, command words, numbers, durations, flags."""
    return (len(tok) < 2 or tok in STOPWORDS or tok in _KEYWORDS or tok in FLAG_WORDS
            or bool(_NUMBER.match(tok)) or bool(_DURATION.match(tok)))


def route(text: str, config: BotConfig, aliases: Aliases | None = None) -> Intent:
    """Route ``text`` to a command and its targets. Never raises on garbage; does no I/O.

    Every word that is not English, a command word, a number, a duration or a flag name is taken as a
    target: it must name a service, a node or an alias of a service (``aliases``, see
    :func:`service_aliases`), else it is reported in ``unknown`` with close matches in ``suggestions``.
    """
    norm = re.sub(r"^/?inferbot\b[\s,:]*", "", normalise(text))
    # Shell punctuation ends the question: what follows ("restart kimi; rm -rf /") is pasted noise, not
    # names, so it is not reported as unknown targets (it never reaches a node either way).
    question = re.sub(r"^/?inferbot\b[\s,:]*", "", normalise(
        _SHELL_TAIL.split(_MENTION.sub(" ", _SLACK_LINK.sub(r"\1", text[:MAX_MESSAGE])), 1)[0]))
    cmd = next((c for c in COMMANDS if c.matches(norm)), None)
    matched = cmd is not None
    if cmd is None:
        cmd = next(c for c in COMMANDS if c.name == "help")
    services_by_name, nodes_by_name = _names(config)
    alias_map: Aliases = {**service_aliases(config), **(aliases or {})}
    all_names = [*services_by_name, *nodes_by_name]
    # The words of a mentioned flag ("--max-model-len", "tensor parallel size") are not targets.
    flag = mentioned_flag(norm)
    tokens = _WORD.findall(FLAG_MENTION.sub(" ", norm))
    in_question = set(_WORD.findall(FLAG_MENTION.sub(" ", question)))
    silence: tuple[float | None, str] | None = None
    if cmd.name == "silence":  # what follows the duration is the reason: command words, not names
        head, seconds, _ = split_silence(norm)
        tokens = _WORD.findall(FLAG_MENTION.sub(" ", head))
        silence = seconds, split_silence(_MENTION.sub(" ", _SLACK_LINK.sub(r"\1", text[:MAX_MESSAGE])))[2]
    picked_services: list[Service] = []
    picked_ids: set[int] = set()  # identities of picked_services (see service_aliases)
    picked_nodes: list[Node] = []

    def pick(found: Sequence[Service]) -> None:
        for s in found:
            if id(s) not in picked_ids:
                picked_ids.add(id(s))
                picked_services.append(s)

    unknown: list[str] = []
    suggestions: list[str] = []
    for raw in tokens:
        tok = raw.strip("./")
        name = _match_name(tok, list(services_by_name))
        if name:
            pick(services_by_name[name])
            continue
        name = _match_name(tok, list(nodes_by_name))
        if name:
            if nodes_by_name[name] not in picked_nodes:
                picked_nodes.append(nodes_by_name[name])
            continue
        key = tok.lower()
        if key in alias_map or key.rsplit("/", 1)[-1] in alias_map:
            found = alias_map.get(key) or alias_map[key.rsplit("/", 1)[-1]]
            pick(found)
            continue
        if _not_a_target(tok) or raw not in in_question:
            continue
        unknown.append(tok)
        suggestions += difflib.get_close_matches(tok, all_names, n=2, cutoff=0.6)
    args: dict[str, ArgValue] = {}
    nums = [int(t) for t in tokens if t.isdigit() and len(t) <= 6]
    if nums:
        args["lines"] = nums[-1]
    # Charts: the time window ("last 6h", "24 h", "7d", "90 min").
    window = _WINDOW.search(norm)
    if window:
        args["window_s"] = int(window.group(1)) * _WINDOW_UNIT[window.group(2)[0]]
    if re.search(r"\bforce\b", norm):
        args["force"] = True
    if flag is not None:
        args["focus"], args["flag"] = "flag", flag
    elif re.search(r"\bnccl\b", norm):
        args["focus"] = "nccl"
    elif re.search(r"\b(env|environment|vars?|variables)\b", norm):
        args["focus"] = "env"
    elif re.search(r"\bwhich\s+model|\bwhat\s+model\b|\bmodels?\s+(is|are)\b", norm):
        args["focus"] = "model"
    elif re.search(r"\bflags?\b|\bargs?\b|\barguments\b", norm):
        args["focus"] = "flags"
    if silence is not None:
        args["duration_s"], args["reason"] = silence
    if cmd.name == "restarts" and RESTART_NEGATION.search(norm):
        args["negated"] = True
    if not matched:
        unknown, suggestions = [], []
        words = [t for t in tokens if t not in all_names]
        keywords = sorted(_KEYWORDS)
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
        wanted = node_names | {s.node for s in services}
        nodes = [n for n in config.nodes if n.name in wanted]
        explicit = True
    else:
        services = list(config.services)
        nodes = list(config.nodes)
        explicit = False
    return Intent(
        command=cmd, services=services, nodes=nodes, explicit_target=explicit, args=args,
        unknown=list(dict.fromkeys(unknown)), suggestions=list(dict.fromkeys(suggestions)), matched=matched,
    )
