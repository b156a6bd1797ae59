"""One message → one reading: the command, its targets, its typed arguments, and how sure the bot is.

The steps, each in its own module: ``markup`` (Slack's markup, once) → ``text`` (tokens, stems, clauses)
→ ``lexicon`` (other languages) → ``settings_words`` (a flag or an environment variable) → names (this
module, with ``names``) → ``scoring`` (every command's words) → ``orders`` (is an order one?) →
``arguments``. Nothing here does I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from importlib import resources

from bot.understanding import arguments, change_words, lexicon, orders, scoring, settings_words
from bot.understanding.commands_text import command_text
from bot.understanding.markup import Message
from bot.understanding.names import Aliases, NameIndex, Target
from bot.understanding.settings_words import Setting
from bot.understanding.text import Token, Words, split_slashes, stem, words
from config.models import BotConfig, Node, Service
from handlers.commands import COMMANDS, Command, command
from handlers.context import Args

# Below this a clause places nothing with confidence.
CONFIDENT = 1.5
# Two readings this close (ratio) are a tie: ask which one.
TIE = 0.85
CHART_CUES = frozenset({"chart", "charts", "graph", "graphs", "plot", "plots", "visualize", "visualise",
                        "visualization", "sparkline", "trend", "trends", "trended", "png"})
CHART_PHRASES = (("over", "time"),)
_CUE_STEMS = frozenset({"chart", "graph", "plot", "visual", "visualis", "visualiz", "trend", "sparklin"})
# Where a name stands: after a command word (with or without a preposition: "status llama", "logs for
# gpu-c"), before one ("llama status"), with 's, between "is" and a state ("is llama up"); after any
# preposition only when it is written like a name ("on gpu-c").
_COMMAND_WORDS = frozenset({"restart", "bounce", "reboot", "status", "logs", "log", "settings", "config", "gpus",
                            "throughput", "compare", "silence", "mute", "unsilence", "unmute", "unlock", "bench",
                            "history", "audit", "diff", "tail", "journal", "flags", "env", "vs", "versus",
                            "and"})
_PREPOSITIONS = frozenset({"on", "for", "of", "in", "at", "from", "about", "with", "to", "vs", "versus", "and",
                           "than"})
_STATES = frozenset({"up", "down", "ready", "alive", "healthy", "running", "loaded", "loading", "ok", "okay",
                     "serving", "back", "done", "hung", "stuck", "dead"})
# The cluster as a whole: never a name, and never "unknown" ("is prod ok?").
_EVERYTHING = frozenset({"prod", "production", "staging", "infra", "cluster", "fleet", "everything", "all",
                         "both", "everyone", "anything", "anywhere"})
# An order's answer when the message is not one.
_INFO_OF = {"restart": "restarts", "bench": "throughput", "silence": "status", "unsilence": "status",
            "unlock": "restarts", "change": "flag", "revert": "changes"}
_VERB = {"restart": "restart", "bench": "run the benchmark on", "silence": "silence", "unsilence": "unsilence",
         "unlock": "clear the restart lock of", "change": "change the settings of", "revert": "revert"}
_SUBORDINATORS = frozenset({"since", "after", "because", "when", "once", "before", "if", "until", "from"})
_MAIN_OPENERS = frozenset({"do", "does", "should", "can", "could", "will", "would", "is", "are", "what", "how",
                           "then"})
_NOUN_BEFORE = frozenset({"the", "a", "that", "this", "last", "latest", "recent", "previous", "next", "each",
                          "every", "another", "one", "any"})
_NEGATORS = frozenset({"don't", "dont", "not", "never", "nobody", "no"})
# The imperative of a question ("show me …", "grab the log"), besides every order's verbs.
_ASKING_VERBS = frozenset({"show", "give", "tell", "check", "grab", "dump", "paste", "list", "get", "pull", "fetch",
                           "print", "display", "send", "post", "tail", "compare", "diff", "plot", "chart", "graph",
                           "pls", "please", "plz", "run"})


@functools.cache
def _data_words(name: str) -> frozenset[str]:
    text = resources.files("bot.understanding").joinpath(f"data/{name}").read_text("utf-8")
    return frozenset(re.sub(r"(?m)^#.*$", "", text).split())


def english() -> frozenset[str]:
    """English words that are never names (``data/english.txt``)."""
    return _data_words("english.txt")


def common_english() -> frozenset[str]:
    """The 15,000 most frequent English words (``data/common_english.txt``; see bench/english_words.py)."""
    return _data_words("common_english.txt")


def model_families() -> frozenset[str]:
    """Open-model family names (``data/model_families.txt``): a name wherever it stands."""
    return _data_words("model_families.txt")


@dataclass
class Reading:
    """What the bot read in a message."""

    command: Command
    services: list[Service] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    explicit_target: bool = False
    args: Args = field(default_factory=Args)
    unknown: list[str] = field(default_factory=list)  # words where a name stands that name nothing
    suggestions: list[str] = field(default_factory=list)  # known names close to the unknown ones
    matched: bool = True  # False: nothing placed (the answer is a short help)
    asked: bool = False  # the answer asks back instead of acting
    score: float = 0.0
    offers: list[str] = field(default_factory=list)  # full commands offered ("status kimi")
    note: str | None = None  # said before the answer (the question back)
    intent: str = ""  # what was understood ("unclear" when nothing was)
    named_services: list[str] = field(default_factory=list)  # the names as the message gave them
    named_nodes: list[str] = field(default_factory=list)


@dataclass
class _Found:
    """Names found in the message: each target and the token that named it."""

    targets: list[Target] = field(default_factory=list)
    where: list[int] = field(default_factory=list)
    tokens: set[int] = field(default_factory=set)
    unknown: list[Token] = field(default_factory=list)

    def in_clause(self, clause: int, toks: Sequence[Token]) -> list[Target]:
        idx = {t.index for t in toks if t.clause == clause}
        return [t for t, i in zip(self.targets, self.where, strict=True) if i in idx]


def _is_word(word: str) -> bool:
    if word == "/inferbot":
        return True  # the slash command typed into a message
    return (word in english() or word in scoring.vocabulary() or word in lexicon.stopwords()
            or word in _EVERYTHING or word in CHART_CUES)


def _looks_like_value(t: Token) -> bool:
    w = t.norm
    return (w.replace(".", "").replace("%", "").isdigit() or arguments.window([t]) is not None
            or len(w) <= 1 or w.startswith("-") or w in ("tok/s", "tokens/s") or w[:1].isdigit()
            or any(ch in w for ch in "_()[]{}=<>\"\\'") or ("/" in w and not w.startswith("/")))


def _name_shaped(word: str) -> bool:
    """Written like a host or a model: a hyphen with a short part or a digit ("gpu-c", "node-7", "qwen2")."""
    parts = word.split("-")
    return (len(parts) > 1 and any(len(p) <= 2 or any(ch.isdigit() for ch in p) for p in parts)) or (
        any(ch.isdigit() for ch in word) and any(ch.isalpha() for ch in word))


def _names(words_: Words, index: NameIndex, taken: set[int]) -> _Found:
    """Every word that names a target; and the words that stand where a name stands but name nothing."""
    found = _Found()
    toks = words_.tokens
    anchor = _COMMAND_WORDS | scoring.strong_words()
    values = {i + 1 for i, _ in words_.assignments}  # NCCL_PROTO=LL: "LL" is a value
    for i, t in enumerate(toks):
        if t.index in taken or t.cjk or t.translated or t.index in values:
            continue
        target = index.exact(t.norm) or index.variant(t.norm)
        if target is None and not _is_word(t.norm) and not _looks_like_value(t):
            target = index.typo(t.norm)
        if target is not None and i > 0 and not toks[i - 1].translated and (
                toks[i - 1].norm in ("except", "excluding", "besides")
                or (toks[i - 1].norm == "not" and (i < 2 or toks[i - 2].part != toks[i - 1].part))):
            found.tokens.add(t.index)  # "restart kimi, not qwen": named, and left out
            continue
        if target is not None:
            found.targets.append(target)
            found.where.append(t.index)
            found.tokens.add(t.index)
            continue
        if t.marked or _is_word(t.norm) or _looks_like_value(t) or not any(ch.isalpha() for ch in t.norm):
            continue
        prev = toks[i - 1].norm if i > 0 and toks[i - 1].part == t.part else None
        nxt = toks[i + 1].norm if i + 1 < len(toks) and toks[i + 1].part == t.part else None
        before2 = toks[i - 2] if i > 1 else None
        after_command = prev in _COMMAND_WORDS or (
            prev in _PREPOSITIONS and before2 is not None and (before2.norm in anchor or before2.index in taken))
        slot = (after_command or t.possessive or nxt in _COMMAND_WORDS
                or (prev in _PREPOSITIONS and _name_shaped(t.norm))
                or (prev in ("is", "are", "was") and (nxt in _STATES or nxt == "still")))
        if t.norm in model_families() or (slot and (_name_shaped(t.norm) or t.norm not in common_english())
                                          and not _chart_cue(t)):
            found.unknown.append(t)
    return found


def _known(index: NameIndex) -> frozenset[str]:
    return frozenset([*index.services, *index.nodes, *index.aliases, *index.variants])


def _chart_cue(t: Token, typos: bool = True) -> bool:
    """"chart", "graphs", "trended", or (``typos``) a misspelling of one ("chrat")."""
    if t.norm in CHART_CUES or t.stem in _CUE_STEMS:
        return True
    if (typos and len(t.norm) >= 4 and t.norm.isalpha() and t.norm not in english()
            and t.norm not in scoring.vocabulary() and t.norm not in common_english()):
        from rapidfuzz.distance import OSA

        return any(OSA.distance(t.norm, c, score_cutoff=1) <= 1 for c in CHART_CUES if len(c) >= 4)
    return False


@functools.cache
def _shared_verbs() -> frozenset[str]:
    """Verbs of more than one order ("turn" alerts off or back on): they pick no order on their own."""
    seen: dict[str, int] = {}
    for c in COMMANDS:
        for v in c.verbs:
            seen[v] = seen.get(v, 0) + 1
    return frozenset(v for v, n in seen.items() if n > 1)


@functools.cache
def _order_verbs() -> dict[str, str]:
    """Every order's verbs → the order (the first command that has it)."""
    out: dict[str, str] = {}
    for c in COMMANDS:
        for v in c.verbs:
            out.setdefault(v, c.name)
    return out


def _adjust(scores: scoring.Scores, clause: Sequence[Token], setting: Setting | None, n_targets: int,
            names: set[int]) -> None:
    """What the words alone cannot weigh: a flag named, a chart asked for, two targets compared, context
    after "since", a restart word used as a noun, an order's verb opening a part, small talk beside a
    question. Each step is one function below, applied in this order."""
    by = scores.by_command
    one_flag = setting is not None and bool(setting.tokens & {t.index for t in clause})
    if one_flag and setting is not None:
        first = min(setting.tokens)
        # "how's throughput since we bumped the mem util": the flag is what changed, not what is asked.
        subordinate = any(t.norm in _SUBORDINATORS and t.index < first for t in clause)
        by["flag"] = by.get("flag", 0.0) + (1.5 if subordinate else 5.0)
    _charts(scores, clause)
    if by.get("compare"):
        # One flag across two services is that flag's answer (it lists each value), not a comparison.
        pair = (n_targets >= 2 and not one_flag) or any(
            len(h.words) > 1 and h.words[0] in ("side", "two", "both", "each") for h in scores.words_of("compare"))
        by["compare"] = by["compare"] + 3.0 if pair else by["compare"] * 0.5
    _context_weighs_half(scores, clause)
    # Settings words as what changed or what is compared ("did anyone change the nccl env").
    if by.get("settings") and max(by.get("changes", 0.0), by.get("compare", 0.0)) >= 3.0:
        by["settings"] *= 0.5
    _restart_words(scores, clause, names)
    _order_verb_first(scores, clause)
    if by.get("smalltalk") and any(v > 0 for c, v in by.items() if c != "smalltalk"):
        by["smalltalk"] = by["smalltalk"] * 0.3


def _charts(scores: scoring.Scores, clause: Sequence[Token]) -> None:
    """A chart only when one is asked for ("chart", "graph", "plot", "trended", "over time"); a misspelt
    "chart" only next to what a chart shows ("chrat throughput kimi")."""
    by = scores.by_command
    in_phrases = {i for h in scores.hits for i in h.tokens}
    free = [t for t in clause if t.index not in in_phrases]
    norms = [t.norm for t in free]
    subject = any(by.get(c) for c in ("chart_throughput", "chart_bench", "chart_loads", "throughput"))
    cue = any(_chart_cue(t, typos=subject) for t in free) or any(
        tuple(norms[i:i + len(p)]) == p for p in CHART_PHRASES for i in range(len(norms)))
    for name in ("chart_throughput", "chart_bench", "chart_loads"):
        if cue and (by.get(name) or name == "chart_throughput"):
            by[name] = by.get(name, 0.0) + 4.0
        elif not cue:
            # Without one, only a phrase about load durations ("how long did it take to load").
            phrases = sum(w for h in scores.words_of(name) for c, w in h.credits
                          if c == name and w >= 3.0 and len(h.words) > 1)
            by[name] = phrases if name == "chart_loads" else 0.0


def _context_weighs_half(scores: scoring.Scores, clause: Sequence[Token]) -> None:
    """What follows "since", "after", "because" … is context, not the question ("is kimi slower since the
    nccl change?"): its words weigh half. A question word opening the sentence ("when did …") is not one; the
    context ends at the next part or question ("if qwen OOMs again, do we restart it")."""
    by = scores.by_command
    sub_at = next((i for i, t in enumerate(clause) if t.norm in _SUBORDINATORS and (i > 0 or t.norm != "when")),
                  None)
    if sub_at is None:
        return
    end = next((i for i in range(sub_at + 2, len(clause)) if clause[i].part != clause[sub_at].part
                or clause[i].norm in _MAIN_OPENERS), len(clause))
    span = {t.index for t in clause[sub_at + 1:end]}
    for h in scores.hits:
        if h.start in span:
            for c, wt in h.credits:
                by[c] = by.get(c, 0.0) - wt / 2


def _restart_words(scores: scoring.Scores, clause: Sequence[Token], names: set[int]) -> None:
    """"after the restart", "the last kimi restart": about restarts, not one; "don't restart" is too."""
    by = scores.by_command
    for h in scores.hits:
        credited = {c for c, _ in h.credits}
        if not credited & {"restart", "restarts"} or len(h.words) != 1:
            continue
        pos = next((i for i, t in enumerate(clause) if t.index == h.start), 0)
        before = next((t.norm for t in reversed(clause[:pos]) if t.index not in names), "")  # names skipped
        if before in _NOUN_BEFORE:
            for c in ("restart", "restarts"):
                by[c] = by.get(c, 0.0) - 1.5
        elif before in _NEGATORS:
            by["restarts"] = by.get("restarts", 0.0) + 2.0


def _order_verb_first(scores: scoring.Scores, clause: Sequence[Token]) -> None:
    """An order's verb opening a part: "restart kimi when the load is done" is about the restart."""
    by = scores.by_command
    verbs = _order_verbs()
    boosted: set[str] = set()
    for part in dict.fromkeys(t.part for t in clause):
        lead = next((t for t in clause if t.part == part and t.norm not in orders.LEAD
                     and t.norm not in orders.POLITE and t.norm not in orders.YOU), None)
        if (lead is not None and lead.norm in verbs and lead.norm not in _shared_verbs()
                and by.get(verbs[lead.norm]) and verbs[lead.norm] not in boosted):
            by[verbs[lead.norm]] += 2.0
            boosted.add(verbs[lead.norm])


@dataclass
class _Clause:
    index: int
    scores: scoring.Scores
    best: list[tuple[str, float]]
    asking: bool  # a question or an imperative, not a statement


def _rank(words_: Words, found: _Found, setting: Setting | None, known: frozenset[str]) -> list[_Clause]:
    """Score each clause. A clause that is all quoted, code or struck is read with the next one: it is what
    that one asks about ("&gt; restart kimi" then "did anyone do this?")."""
    out = []
    distinct = len({(tuple(id(s) for s in t.services), tuple(id(n) for n in t.nodes)) for t in found.targets})
    verbs = _order_verbs()
    carried: list[Token] = []
    taken = found.tokens | (setting.tokens if setting else set())
    for c in words_.clauses:
        toks = [*carried, *words_.clause_tokens(c.index)]
        if c.marked and c.index + 1 < len(words_.clauses):
            carried = toks
            continue
        carried = []
        s = scoring.score(toks, taken, known)
        _adjust(s, toks, setting, distinct, found.tokens)
        live = [t for t in toks if not t.marked]
        lead = next((t for t in live if t.norm not in orders.LEAD), None)
        asking = c.question or (lead is not None and (lead.norm in orders.QUESTION_OPENERS or lead.norm in verbs
                                                      or lead.norm in _ASKING_VERBS)) or any(
            t.norm in ("pls", "please", "plz") for t in live) or bool(
            live and live[0].norm in ("also", "btw", "plus", "and", "separately"))  # "… also gpus"
        out.append(_Clause(c.index, s, s.best(), asking))
    return out


def _targets(config: BotConfig, chosen: Sequence[Target]) -> tuple[list[Service], list[Node], bool]:
    """The services and nodes named (services on the named nodes only); none named → all."""
    picked: list[Service] = []
    ids: set[int] = set()
    nodes: list[Node] = []
    for t in chosen:
        for s in t.services:
            if id(s) not in ids:
                ids.add(id(s))
                picked.append(s)
        for n in t.nodes:
            if n not in nodes:
                nodes.append(n)
    if not picked and not nodes:
        return list(config.services), list(config.nodes), False
    names = {n.name for n in nodes}
    services = list(picked)
    if names:
        on_nodes = [s for s in config.services if s.node in names]
        services = [s for s in services if s.node in names] if picked else on_nodes
    wanted = names | {s.node for s in services}
    return services, [n for n in config.nodes if n.name in wanted], True


def _without_reason(w: Words) -> Words:
    """"silence kimi 2h restart gpus after the status logs are saved": what follows a silence's duration is
    its reason (``arguments`` reads it from the text), never names or other commands."""
    silence = command("silence")
    lead = next((t for t in w.tokens if t.norm not in orders.LEAD), None)
    if lead is None or lead.norm not in silence.verbs:
        return w
    toks = list(w.tokens)
    for i, t in enumerate(toks):
        nxt = toks[i + 1:i + 2]
        if arguments.window([t]) is not None or (t.norm.isdigit() and nxt and arguments.window([t, nxt[0]])):
            cut = i + (1 if arguments.window([t]) is not None else 2)
            kept = tuple(toks[:cut])
            clauses = tuple(c for c in w.clauses if c.start < cut)
            clauses = tuple(replace(c, end=min(c.end, cut)) for c in clauses)
            return replace(w, tokens=kept, clauses=clauses)
    return w


def _joined(w: Words, clause: int) -> bool:
    """Two questions in one sentence: joined by "and", "also", "plus" or "&"."""
    return any(t.norm in ("and", "also", "plus", "&", "then") for t in w.clause_tokens(clause))


def _family(name: str) -> str:
    if name in ("restart", "restarts"):
        return "restart"
    return command(name).family or name


def _chosen_targets(found: _Found, w: Words, clause: int | None) -> list[Target]:
    """The names of the answering clause, else of the whole message."""
    if clause is not None:
        here = found.in_clause(clause, w.tokens)
        if here:
            return here
    return list(found.targets)


def understand(message: Message, config: BotConfig, aliases: Aliases | None = None) -> Reading:
    """Read ``message`` against ``config`` (and the services' other names, ``aliases``). Never raises."""
    index = NameIndex.build(config, aliases)
    known = _known(index)
    w = split_slashes(words(message), lambda x: index.exact(x) is not None)
    w = lexicon.translate(w, lambda x: x in known or _is_word(x) or index.exact(x) is not None)
    w = _without_reason(w)
    setting = settings_words.find(w)
    found = _names(w, index, set(setting.tokens) if setting else set())
    clauses = _rank(w, found, setting, known)
    unknown_words = list(dict.fromkeys(t.norm for t in found.unknown))
    suggestions = list(dict.fromkeys(s for u in unknown_words for s in index.suggest(u)))

    placed = [c for c in clauses if c.best and c.best[0][1] >= CONFIDENT]
    primary = next((c for c in placed if c.asking), placed[0] if placed else None)
    if primary is None and clauses:
        primary = max(clauses, key=lambda c: c.best[0][1] if c.best else 0.0)
    best = primary.best if primary else []

    reading = Reading(command=command("help"), unknown=unknown_words, suggestions=suggestions)
    chosen = _chosen_targets(found, w, primary.index if primary else None)
    services, nodes, explicit = _targets(config, chosen)
    reading.services, reading.nodes, reading.explicit_target = services, nodes, explicit
    reading.named_services = list(dict.fromkeys(s.name for t in chosen for s in t.services))
    reading.named_nodes = list(dict.fromkeys(n.name for t in chosen for n in t.nodes))
    change = change_words.read(message, w, found.tokens, index.find)  # a settings change is read by its shape
    if change is not None and change.decision in ("order", "ask"):
        if change.targets:
            reading.services, reading.nodes, reading.explicit_target = _targets(config, change.targets)
        reading.unknown = change.unknown_of(reading.unknown)  # its values are not names
        said = change_words.understood(change, setting, reading.services, reading.explicit_target, reading.unknown)
        reading.command, reading.intent, reading.score = command(said.command), said.command, 9.0
        reading.args, reading.asked, reading.note, reading.offers = said.args, said.asked, said.note, said.offers
        return reading

    if not best or best[0][1] < 1.0:
        return _unplaced(reading, w, best)
    name, top = best[0]
    second = next(((n, s) for n, s in best[1:] if _family(n) != _family(name)), None)
    reading.command, reading.intent, reading.score = command(name), name, round(top, 2)

    if all(t.marked for t in w.tokens) and _family(name) != "restart":
        return _unplaced(reading, w, best, paste=True)  # a paste with no question ("```+---- NVIDIA-SMI")
    if reading.command.family in ("restart", "bench", "silence", "unlock") or name in _INFO_OF:
        _order(reading, primary, w, found, message.to_other)
        if not reading.matched:
            return _unplaced(reading, w, best)
    elif (second is not None and second[1] >= TIE * top and top < 6.0 and primary is not None
          and _named(primary, name) and _named(primary, second[0])):
        _two_readings(reading, primary, w, (name, top), second)
    _second_question(reading, clauses, primary, found, w, config)
    skip = found.tokens | (setting.tokens if setting else set())
    reading.args = arguments.parse(reading.command, w, message, setting, reading.args.negated, skip)
    if reading.command.name == "flag" and setting is None:
        # "flag" scored on its own words without naming one: the settings answer.
        reading.command, reading.intent = command("settings"), "settings"
        reading.args = arguments.parse(reading.command, w, message, None, False, skip)
    return reading


def _named(clause: _Clause, name: str) -> bool:
    """A reading the message names outright (a strong word of it), not one it only leans towards."""
    return any(c == name and w >= 3.0 for h in clause.scores.hits for c, w in h.credits)


def _two_readings(reading: Reading, primary: _Clause, w: Words, best: tuple[str, float],
                  second: tuple[str, float]) -> None:
    """Two readings nearly as good: "kimi status and gpus" answers the first named and offers the second;
    otherwise the answer asks which one ("kimi logs or status")."""
    name, top = best
    targets = (reading.services, reading.nodes)
    if _joined(w, primary.index) and primary.scores.words_of(second[0]):
        if primary.scores.first_at(second[0]) < primary.scores.first_at(name):
            name, second = second[0], (name, top)
            reading.command, reading.intent = command(name), name
        reading.offers.append(command_text(second[0], *targets, explicit=reading.explicit_target))
    else:
        reading.asked = True
        reading.offers = [command_text(n, *targets, explicit=reading.explicit_target) for n in (name, second[0])]


def _second_question(reading: Reading, clauses: list[_Clause], primary: _Clause | None, found: _Found, w: Words,
                     config: BotConfig) -> None:
    """A second question in a later sentence ("kimi status? also gpus"): the first is answered, the second
    offered as a full command (with its own targets, else the first's)."""
    if primary is None or reading.asked:
        return
    later = [c for c in clauses if c.index > primary.index and c.best and c.best[0][1] >= CONFIDENT
             and _family(c.best[0][0]) != _family(reading.intent) and c.asking]
    if not later:
        return
    other = later[0].best[0][0]
    if command(other).family is None and other not in _INFO_OF:
        tgt = _chosen_targets(found, w, later[0].index)
        s2, n2, e2 = _targets(config, tgt) if tgt else (reading.services, reading.nodes, reading.explicit_target)
        reading.offers.append(command_text(other, s2, n2, explicit=e2))


def _unplaced(reading: Reading, w: Words, best: list[tuple[str, float]], paste: bool = False) -> Reading:
    """Nothing placed with confidence: a name alone is its status; emoji alone is small talk; else short help
    with the best guesses as full commands."""
    live = [t for t in w.tokens if not t.marked]
    if reading.explicit_target and not paste:
        reading.command, reading.intent, reading.score = command("status"), "status", 1.0
        return reading
    if not live and w.emoji:
        reading.command, reading.intent, reading.score = command("smalltalk"), "smalltalk", 1.0
        return reading
    if reading.unknown:
        reading.command, reading.intent = command("status"), "status"  # "llama?": I don't know llama
        return reading
    reading.matched, reading.intent = False, "unclear"
    reading.offers = [command_text(n, reading.services, reading.nodes, explicit=reading.explicit_target)
                      for n, _ in best[:2] if command(n).family is None or n == "restarts"]
    return reading


def _order(reading: Reading, primary: _Clause | None, w: Words, found: _Found, to_other: bool) -> None:
    """Restart, bench, silence, unsilence, unlock: an order only when it is one (``orders.decide``)."""
    name = reading.command.name
    family = reading.command.family
    order_name = name if reading.command.confirm else next(
        (c.name for c in COMMANDS if c.confirm and c.family == family), name)
    order = command(order_name)
    verb: Token | None = None
    if primary is not None:
        # Not a word a phrase of another command took ("restart history", "restart count").
        other = {i for h in primary.scores.hits if len(h.words) > 1
                 and order_name not in {c for c, _ in h.credits} for i in h.tokens}
        typos = {i for h in primary.scores.hits if h.typo and order_name in {c for c, _ in h.credits}
                 for i in h.tokens}
        clause = [t for t in w.tokens if t.clause <= primary.index and t.index not in other]
        here = [t for t in clause if t.clause == primary.index] + [t for t in clause if t.clause != primary.index]
        stems = {stem(v) for v in order.verbs}
        verb = next((t for t in here if t.norm in order.verbs or t.index in typos), None) or next(
            (t for t in here if t.stem in stems and t.norm not in ("run", "do", "start", "turn", "end")), None)
        if verb is not None and verb.norm == "kick" and order_name == "restart" and any(
                u.index == verb.index + 1 and u.norm == "off" for u in w.tokens):
            verb = None  # "kick off a benchmark"
    if verb is None:
        if not reading.command.confirm:
            return  # "restart history", "restarted": the answer about it
        if reading.score < 3.0:
            # Only a hint of an order ("alert"), no verb: nothing placed.
            reading.command, reading.intent, reading.matched = command("help"), "unclear", False
            return
        decision: orders.Decision = "ask"
    else:
        decision = orders.decide(w, verb, found.tokens, allow_time=family == "silence", to_other=to_other)
    if decision == "order" and not reading.explicit_target and not reading.unknown:
        decision = "ask"  # an order aimed at no service: which one?
    if decision == "order":
        reading.command, reading.intent = order, order_name
        return
    info = command(_INFO_OF.get(order_name, "restarts"))
    reading.command, reading.intent = info, info.name
    if decision == "negated":
        reading.args = Args(negated=True)
    elif decision == "ask":
        reading.asked = True
        if reading.explicit_target:
            text = command_text(order_name, reading.services, reading.nodes)
            who = " ".join(dict.fromkeys(s.name for s in reading.services))
            reading.note = f"Did you want me to {_VERB[order_name]} {who}? Say `{text}`."
            reading.offers = [text]
        else:
            names = ", ".join(dict.fromkeys(s.name for s in reading.services)) or "none configured"
            reading.note = (f"Did you want me to {_VERB[order_name]} a service? Name it: "
                            f"`{command_text(order_name, [], [])} SERVICE` (services: {names}).")
