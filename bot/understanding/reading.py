"""One message → one reading: the command, its targets, its typed arguments, and how sure the bot is.

The steps, each in its own module: ``markup`` (Slack's markup, once) → ``text`` (tokens, stems, clauses)
→ ``lexicon`` (other languages) → ``settings_words`` (a flag or an environment variable) → ``slots`` (names,
where a name stands, with ``names``) → ``scoring`` (every command's words) and ``weighing`` (what the words
alone cannot weigh) → ``orders`` (is an order one?) → ``arguments``. Nothing here does I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from bot.understanding import arguments, change_words, lexicon, orders, scoring, settings_words, slots, weighing
from bot.understanding.commands_text import command_text
from bot.understanding.markup import Message
from bot.understanding.names import Aliases, NameIndex, Target
from bot.understanding.settings_words import Setting
from bot.understanding.slots import Found
from bot.understanding.text import Token, Words, split_compounds, stem, words
from config.models import BotConfig, Node, Service
from handlers.commands import COMMANDS, Command, command
from handlers.context import Args

# Below this a clause places nothing with confidence.
CONFIDENT = 1.5
# Two readings this close (ratio) are a tie: ask which one.
TIE = 0.85
# An order's answer when the message is not one.
_INFO_OF = {"restart": "restarts", "bench": "throughput", "silence": "status", "unsilence": "status",
            "unlock": "restarts", "change": "flag", "revert": "changes"}
# A clause of names and these words adds its names to the question before it ("…, and what about qwen?").
_ALSO = frozenset("and also plus what about how for on too same as well the of then in at both or".split())
_DETERMINERS = frozenset({"the", "a", "an", "this", "that", "last", "latest", "next", "another", "my", "our",
                          "your", "their"})
# A question about doing an order, not about what it did ("what if we benchmarked kimi", "should we bench qwen").
_DOING_IT = frozenset({"if", "would", "should", "could", "suppose", "supposing", "hypothetically", "shall"})
_SUBJECTS = frozenset({"you", "u", "we", "i", "they", "anyone", "anybody", "someone", "somebody", "it", "people"})
# "can we …", "may i …": a question about doing it.
_MAY = frozenset({"can", "could", "may", "might", "must"})
_DOERS = frozenset({"we", "i", "someone", "somebody", "anyone", "anybody"})
# An order's object that is every service.
_ALL = frozenset({"everything", "all", "both", "every", "everyone"})
_THE_BOT = frozenset({"bot", "inferbot", "the"})
# Words of a question about who did something (with a past-tense verb): the bot's own record.
_WHO_DID = frozenset({"who", "whoever", "anyone", "anybody", "someone", "somebody", "did", "when"})
_VERB = {"restart": "restart", "bench": "run the benchmark on", "silence": "silence", "unsilence": "unsilence",
         "unlock": "clear the restart lock of", "change": "change the settings of", "revert": "revert"}
# The imperative of a question ("show me …", "grab the log"), besides every order's verbs.
_ASKING_VERBS = frozenset({"show", "give", "tell", "check", "grab", "dump", "paste", "list", "get", "pull", "fetch",
                           "print", "display", "send", "post", "tail", "compare", "diff", "plot", "chart", "graph",
                           "pls", "please", "plz", "run"})


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
class _Clause:
    index: int
    scores: scoring.Scores
    best: list[tuple[str, float]]
    asking: bool  # a question or an imperative, not a statement


def _rank(words_: Words, found: Found, setting: Setting | None, known: frozenset[str]) -> list[_Clause]:
    """Score each clause. A clause that is all quoted, code or struck is read with the next one: it is what
    that one asks about ("&gt; restart kimi" then "did anyone do this?")."""
    out = []
    distinct = len({(tuple(id(s) for s in t.services), tuple(id(n) for n in t.nodes)) for t in found.targets})
    verbs = weighing.order_verbs()
    carried: list[Token] = []
    taken = found.tokens | (setting.tokens if setting else set())
    for c in words_.clauses:
        toks = [*carried, *words_.clause_tokens(c.index)]
        if c.marked and c.index + 1 < len(words_.clauses):
            carried = toks
            continue
        carried = []
        s = scoring.score(toks, taken, known)
        weighing.adjust(s, toks, setting, distinct, found.tokens, c.question)
        live = [t for t in toks if not t.marked]
        lead = next((t for t in live if t.norm not in orders.LEAD), None)
        after = next((t for t in live if lead is not None and t.index > lead.index and t.index not in found.tokens),
                     None)
        # "benchmark finished on kimi": an order's word as the subject of a report asks nothing.
        reported = lead is not None and lead.norm in verbs and after is not None and after.norm in orders.NOUN_AFTER
        asking = c.question or (lead is not None and not reported and (
            lead.norm in orders.QUESTION_OPENERS or lead.norm in verbs or lead.norm in _ASKING_VERBS)) or any(
            t.norm in ("pls", "please", "plz") for t in live) or bool(
            live and live[0].norm in ("also", "btw", "plus", "and", "separately")) or any(  # "… also gpus"
            a.part != b.part and b.norm in orders.QUESTION_OPENERS and b.norm not in orders.LEAD
            for a, b in itertools.pairwise(live))  # "kimi was flapping, can someone tell me if it's stable"
        # The first of two questions joined in a sentence ("kimi status and what's the throughput") asks too.
        joined = c.index + 1 < len(words_.clauses) and bool(words_.clause_tokens(c.index + 1)) and (
            words_.clause_tokens(c.index + 1)[0].norm in ("and", "but", "then", "&", "also", "plus", "btw"))
        out.append(_Clause(c.index, s, s.best(), asking or joined))
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


_ORDER_FAMILIES = frozenset({"restart", "bench", "silence", "unlock"})


def _family(name: str) -> str:
    if name in ("restart", "restarts"):
        return "restart"
    return command(name).family or name


def _chosen_targets(found: Found, w: Words, clause: int | None, clauses: Sequence[_Clause] = ()) -> list[Target]:
    """The names of the answering clause and of the clauses that are only names ("tp of kimi, and what about
    qwen?"), else of the whole message."""
    if clause is not None:
        here = found.in_clause(clause, w.tokens)
        answering = next((c for c in clauses if c.index == clause), None)
        if answering is not None and answering.best and _family(answering.best[0][0]) not in _ORDER_FAMILIES:
            for c in clauses:
                if c.index != clause and all(t.norm in _ALSO or t.index in found.tokens
                                             for t in w.clause_tokens(c.index)):
                    here += found.in_clause(c.index, w.tokens)
        if here:
            # "infra bumped the driver on gpu-b. did qwen restart?": the node of a service asked about — not
            # one that another question asks about ("qwen logs, also how's gpu-b's vram").
            hosts = {s.node for t in here for s in t.services}
            clause_of = {t.index: t.clause for t in w.tokens}
            others = {c.index for c in clauses if c.index != clause and c.asking and c.best
                      and c.best[0][1] >= CONFIDENT}
            return here + [t for t, i in zip(found.targets, found.where, strict=True)
                           if t not in here and not t.services and any(n.name in hosts for n in t.nodes)
                           and clause_of.get(i) not in others]
    return list(found.targets)


def understand(message: Message, config: BotConfig, aliases: Aliases | None = None) -> Reading:
    """Read ``message`` against ``config`` (and the services' other names, ``aliases``). Never raises."""
    index = NameIndex.build(config, aliases)
    known = slots.known(index)
    w = split_compounds(words(message), lambda x: (index.exact(x) or index.variant(x) or index.typo(x)) is not None)
    w = lexicon.translate(w, lambda x: x in known or slots.is_word(x) or index.exact(x) is not None)
    said = w  # the whole message: a silence's reason is read for doubts, never for names or commands
    w = _without_reason(w)
    setting = settings_words.find(w)
    found = slots.find(w, index, set(setting.tokens) if setting else set())
    if setting is not None and setting.measured and found.targets and not any(t.services for t in found.targets):
        setting = None  # "memory utilization on gpu-b": the GPUs', not the flag
    clauses = _rank(w, found, setting, known)
    unknown_words = list(dict.fromkeys(t.norm for t in found.unknown))
    suggestions = list(dict.fromkeys(s for u in unknown_words for s in index.suggest(u)))

    primary = _primary(clauses)
    best = primary.best if primary else []

    reading = Reading(command=command("help"), unknown=unknown_words, suggestions=suggestions)
    chosen = _chosen_targets(found, w, primary.index if primary else None, clauses)
    services, nodes, explicit = _targets(config, chosen)
    reading.services, reading.nodes, reading.explicit_target = services, nodes, explicit
    reading.named_services = list(dict.fromkeys(s.name for t in chosen for s in t.services))
    reading.named_nodes = list(dict.fromkeys(n.name for t in chosen for n in t.nodes))
    change = change_words.read(message, w, found.tokens, index.find)  # a settings change is read by its shape
    if change is not None and change.decision in ("order", "ask"):
        return _as_change(reading, change, setting, config)

    if not best or best[0][1] < 1.0:
        return _unplaced(reading, w, best)
    if (primary is not None and not primary.asking and not explicit and not reading.unknown and setting is None
            and sum(not t.marked for t in w.tokens) >= 5
            and not any(wt >= 3.0 for c in clauses for h in c.scores.hits for _, wt in h.credits)):
        # A sentence that asks nothing, names nothing and has no strong word ("CUDA error: an illegal memory
        # access was encountered"): a paste or a remark, not a question (a few words are a query: "any alarms").
        return _unplaced(reading, w, best)
    name, top = best[0]
    second = next(((n, s) for n, s in best[1:] if _family(n) != _family(name)), None)
    reading.command, reading.intent, reading.score = command(name), name, round(top, 2)

    if all(t.marked for t in w.tokens) and _family(name) != "restart":
        return _unplaced(reading, w, best, paste=True)  # a paste with no question ("```+---- NVIDIA-SMI")
    if reading.command.family in ("restart", "bench", "silence", "unlock") or name in _INFO_OF:
        _order(reading, primary, w, found, message.to_other or message.beside_other, config, said)
        if not reading.matched:
            return _unplaced(reading, w, best)
    elif (second is not None and primary is not None and _named(primary, name) and _named(primary, second[0])
          and ((second[1] >= TIE * top and top < 6.0) or _and_between(w, primary, name, second[0]))):
        _two_readings(reading, primary, w, (name, top), second, found, config)
    _second_question(reading, clauses, primary, found, w, config, setting)
    skip = found.tokens | (setting.tokens if setting else set())
    reading.args = arguments.parse(reading.command, w, message, setting, reading.args.negated, skip)
    if reading.command.name == "flag" and setting is None:
        # "flag" scored on its own words without naming one: the settings answer.
        reading.command, reading.intent = command("settings"), "settings"
        reading.args = arguments.parse(reading.command, w, message, None, False, skip)
    return reading


def _primary(clauses: Sequence[_Clause]) -> _Clause | None:
    """The clause to answer: the first placed one that asks, else the first placed, else the best scored."""
    placed = [c for c in clauses if c.best and c.best[0][1] >= CONFIDENT]
    primary = next((c for c in placed if c.asking), placed[0] if placed else None)
    if primary is None and clauses:
        primary = max(clauses, key=lambda c: c.best[0][1] if c.best else 0.0)
    return primary


def _as_change(reading: Reading, change: change_words.ChangeOrder, setting: Setting | None,
               config: BotConfig) -> Reading:
    """A settings change read by its shape ("set --max-num-seqs 128 on kimi"): its command and targets."""
    if change.targets:
        reading.services, reading.nodes, reading.explicit_target = _targets(config, change.targets)
    reading.unknown = change.unknown_of(reading.unknown)  # its values are not names
    ch = change_words.understood(change, setting, reading.services, reading.explicit_target, reading.unknown)
    reading.command, reading.intent, reading.score = command(ch.command), ch.command, 9.0
    reading.args, reading.asked, reading.note, reading.offers = ch.args, ch.asked, ch.note, ch.offers
    return reading


def _and_between(w: Words, clause: _Clause, a: str, b: str) -> bool:
    """Two commands named either side of an "and" ("qwen logs and gpu temps"): two questions, the first
    answered."""
    first, last = sorted((clause.scores.first_at(a), clause.scores.first_at(b)))
    return any(t.norm == "and" for t in w.clause_tokens(clause.index) if first < t.index < last)


def _named(clause: _Clause, name: str) -> bool:
    """A reading the message names outright (a strong word of it), not one it only leans towards."""
    return any(c == name and w >= 3.0 for h in clause.scores.hits for c, w in h.credits)


def _two_readings(reading: Reading, primary: _Clause, w: Words, best: tuple[str, float],
                  second: tuple[str, float], found: Found, config: BotConfig) -> None:
    """Two readings nearly as good: "kimi status and gpus" answers the first named and offers the second (each
    with the names on its side of the "and": "qwen logs and gpu temps on gpu-b"); otherwise the answer asks
    which one ("kimi logs or status")."""
    name, top = best
    targets = (reading.services, reading.nodes)
    if _joined(w, primary.index) and primary.scores.words_of(second[0]):
        if primary.scores.first_at(second[0]) < primary.scores.first_at(name):
            name, second = second[0], (name, top)
            reading.command, reading.intent = command(name), name
        join = next((t.index for t in w.clause_tokens(primary.index) if t.norm == "and"
                     and primary.scores.first_at(name) < t.index < primary.scores.first_at(second[0])), None)
        mine = [t for t, i in zip(found.targets, found.where, strict=True) if join is not None and i < join]
        theirs = [t for t, i in zip(found.targets, found.where, strict=True) if join is not None and i > join]
        if mine and theirs and "compare" not in (name, second[0]):
            reading.services, reading.nodes, _ = _targets(config, mine)
            reading.named_services = list(dict.fromkeys(s.name for t in mine for s in t.services))
            reading.named_nodes = list(dict.fromkeys(n.name for t in mine for n in t.nodes))
            targets = ([s for t in theirs for s in t.services], [n for t in theirs for n in t.nodes])
        reading.offers.append(command_text(second[0], *targets, explicit=reading.explicit_target))
    else:
        reading.asked = True
        reading.offers = [command_text(n, *targets, explicit=reading.explicit_target) for n in (name, second[0])]


def _second_question(reading: Reading, clauses: list[_Clause], primary: _Clause | None, found: Found, w: Words,
                     config: BotConfig, setting: Setting | None) -> None:
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
        args = Args(flag=setting.name if setting.kind == "flag" else None,
                    env=setting.name if setting.kind == "env" else None) if setting and other == "flag" else None
        reading.offers.append(command_text(other, s2, n2, args, explicit=e2))


def _unplaced(reading: Reading, w: Words, best: list[tuple[str, float]], paste: bool = False) -> Reading:
    """Nothing placed with confidence: a name alone is its status; emoji alone is small talk; else short help
    with the best guesses as full commands."""
    # The bot addressed by name beside an emoji is still only the emoji (":wave: bot").
    live = [t for t in w.tokens if not t.marked and t.norm not in _THE_BOT]
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


def _order_verb(primary: _Clause | None, w: Words, order_name: str, later: bool = False) -> Token | None:
    """The verb of the order ``order_name`` in the answering clause (else before it; ``later``: after it)."""
    if primary is None:
        return None
    order = command(order_name)
    # Not a word a phrase of another command took ("restart history", "restart count").
    other = {i for h in primary.scores.hits if len(h.words) > 1
             and order_name not in {c for c, _ in h.credits} for i in h.tokens}
    typos = {i for h in primary.scores.hits if h.typo and order_name in {c for c, _ in h.credits}
             for i in h.tokens}
    clause = [t for t in w.tokens if (t.clause > primary.index if later else t.clause <= primary.index)
              and t.index not in other]
    here = [t for t in clause if t.clause == primary.index] + [t for t in clause if t.clause != primary.index]
    stems = {stem(v) for v in order.verbs}
    # "kick off a restart": "kick" with "off" is a light verb, its noun the order (a benchmark's own verb). "the
    # bench", "a restart" are nouns, not the verb, unless a light verb has them ("do a restart of kimi").
    off = {t.index - 1 for t in w.tokens if t.norm == "off"}
    nouns = {b.index for a, b in itertools.pairwise(w.tokens) if a.norm in _DETERMINERS and a.part == b.part} - {
        c.index for a, b, c in zip(w.tokens, w.tokens[1:], w.tokens[2:], strict=False)
        if a.norm in orders.LIGHT_VERBS | {"off"} and b.norm in _DETERMINERS}
    undo = {t.index for t in here if t.norm in weighing.UNDO_VERBS and order_name in weighing.UNDOES.values()}
    # "do you think i should bench kimi": "do" before who does it asks; it is no verb of the order.
    nouns |= {a.index for a, b in itertools.pairwise(w.tokens) if a.norm in ("do", "does", "did")
              and b.norm in _SUBJECTS}
    verb = next((t for t in here if (t.norm in order.verbs or t.index in typos or t.index in undo)
                 and t.index not in nouns
                 and not (t.norm == "kick" and t.index in off and order_name != "bench")), None) or next(
        (t for t in here if t.stem in stems and t.index not in nouns
         and t.norm not in ("run", "do", "start", "turn", "end")), None)
    return verb


# Wanting an order said as a noun ("need a restart on qwen please").
_WANTING = frozenset({"please", "pls", "plz", "need", "needs", "want", "wants", "needed"})
# A part that orders what was said before it ("…, please do it", "go ahead", "make it so").
_GO_AHEAD = frozenset({("do", "it"), ("do", "that"), ("do", "this"), ("go", "ahead"), ("go", "for", "it"),
                       ("make", "it", "so"), ("go", "ahead", "and", "do", "it"), ("don't", "do", "it"),
                       ("dont", "do", "it"), ("do", "not", "do", "it"), ("don't", "do", "that")})
_GO_FILLER = frozenset({"please", "pls", "plz", "just", "then", "ok", "okay", "so", "now", "and", "yes", "yeah"})


def _go_ahead(w: Words) -> Token | None:
    """The first word of a part that only says "do it" (its verb stands for the order said before it)."""
    parts: dict[int, list[Token]] = {}
    for t in w.tokens:
        if not t.marked:
            parts.setdefault(t.part, []).append(t)
    for toks in list(parts.values())[1:]:
        core = tuple(t.norm for t in toks if t.norm not in _GO_FILLER)
        if core in _GO_AHEAD:
            return next(t for t in toks if t.norm in ("do", "go", "make"))
    return None


_CONDITION_OPENERS = frozenset({"when", "whenever", "once", "after", "until", "till", "before", "if", "unless",
                                "while"})


def _not_in_the_condition(reading: Reading, w: Words, found: Found, verb: Token, config: BotConfig) -> None:
    """The names in a condition after the order are not its targets: "restart qwen when kimi is done loading"
    is about qwen."""
    start = next((t.index for t in w.clause_tokens(verb.clause) if t.index > verb.index
                  and t.norm in _CONDITION_OPENERS), None)
    if start is None:
        return
    end = w.clauses[verb.clause].end
    kept = [t for t, i in zip(found.targets, found.where, strict=True)
            if not start < i < end and (t.services or t.nodes)]
    names = {s.name for t in kept for s in t.services} | {n.name for t in kept for n in t.nodes}
    if not kept or not names & (set(reading.named_services) | set(reading.named_nodes)):
        return
    chosen = [t for t in kept if {s.name for s in t.services} | {n.name for n in t.nodes} <= (
        set(reading.named_services) | set(reading.named_nodes))]
    reading.services, reading.nodes, reading.explicit_target = _targets(config, chosen)
    reading.named_services = list(dict.fromkeys(s.name for t in chosen for s in t.services))
    reading.named_nodes = list(dict.fromkeys(n.name for t in chosen for n in t.nodes))


def _everything(w: Words, verb: Token | None) -> bool:
    """The order's object is every service ("unsilence everything", "bench both models")."""
    return verb is not None and any(t.norm in _ALL for t in w.tokens if t.part == verb.part and t.index > verb.index)


def _order(reading: Reading, primary: _Clause | None, w: Words, found: Found, to_other: bool,
           config: BotConfig, said: Words | None = None) -> None:
    """Restart, bench, silence, unsilence, unlock: an order only when it is one (``orders.decide``)."""
    name = reading.command.name
    family = reading.command.family
    order_name = name if reading.command.confirm else next(
        (c.name for c in COMMANDS if c.confirm and c.family == family), name)
    verb = _order_verb(primary, w, order_name)
    if verb is not None:
        _not_in_the_condition(reading, w, found, verb, config)
    if verb is None:
        later = _order_verb(primary, w, order_name, later=True)
        if later is not None and orders.negated(w, later):
            _not_an_order(reading, "negated", order_name, later, w)  # "qwen recovered on its own. no restart needed"
            return
        go = _go_ahead(w)
        if go is not None and reading.explicit_target and family in _ORDER_FAMILIES:
            # "kimi needs a restart, please do it": an order by reference — asked back, never confirmed.
            _not_an_order(reading, "negated" if orders.negated(w, go) else "ask", order_name, go, w)
            return
        here = w.clause_tokens(primary.index) if primary else ()
        want = next((t for t in here if t.norm in _WANTING and not t.marked), None)
        one = any(a.norm in ("a", "an") and b.norm in command(order_name).verbs for a, b in itertools.pairwise(here))
        if (want is not None and one and reading.explicit_target and family in _ORDER_FAMILIES
                and reading.command.name == _INFO_OF.get(order_name) and not any(
                    t.norm in orders.QUESTION_OPENERS for t in w.clause_tokens(want.clause)[:1])):
            # "need a restart on qwen please", "kimi needs a restart": one order wanted, as a noun — asked back.
            _not_an_order(reading, "negated" if orders.negated(w, want) else "ask", order_name, want, w)
            return
        if not reading.command.confirm:
            return  # "restart history", "restarted": the answer about it
        if reading.score < 3.0:
            # Only a hint of an order ("alert"), no verb: nothing placed.
            reading.command, reading.intent, reading.matched = command("help"), "unclear", False
            return
        decision: orders.Decision = "ask"
    else:
        decision = orders.decide(w, verb, found.tokens, allow_time=order_name == "silence", to_other=to_other)
        if decision == "order" and said is not None and len(said.tokens) > len(w.tokens):
            # "silence kimi 2h, not now", "silence qwen 1h if it flaps again": the reason takes it back or doubts.
            decision = orders.reason_doubts(said, verb, len(w.tokens))
    if decision == "order" and not reading.explicit_target and not reading.unknown and not _everything(w, verb):
        decision = "ask"  # an order aimed at no service: which one?
    if decision == "order":
        reading.command, reading.intent = command(order_name), order_name
        return
    _not_an_order(reading, decision, order_name, verb, w)


def _not_an_order(reading: Reading, decision: orders.Decision, order_name: str, verb: Token | None,
                  w: Words) -> None:
    """The answer about an order that is not one: its information, a promise not to, or a question back."""
    info = command(_INFO_OF.get(order_name, "restarts"))
    here = [t for t in w.tokens if verb is not None and t.clause == verb.clause]
    if decision == "info" and order_name != "restart" and verb is not None and verb.norm.endswith("ed") and any(
            t.norm in _WHO_DID for t in here):
        info = command("audit")  # "who cleared the lock on qwen", "did anyone unsilence kimi": the bot's record
    elif decision == "info" and order_name != "restart" and here and here[0].norm == "how":
        info = command("help")  # "how do i silence a service": how the command is used
    # Understood as the order when it is about doing it ("bench kimi?", "what if we benchmarked kimi", "don't run
    # a bench on qwen"), and answered with what is known about it; what it did is its information ("what did the
    # last bench say"); a restart's information is its own command ("restarts").
    about_doing = decision == "negated" or (decision == "ask" and verb is not None) or any(
        t.norm in _DOING_IT for t in here) or any(
        a.norm in _MAY and b.norm in _DOERS for a, b in itertools.pairwise(here))  # "can we unlock qwen?"
    reading.command = info
    reading.intent = order_name if order_name != "restart" and about_doing and info.name != "audit" else info.name
    who = " ".join(dict.fromkeys(s.name for s in reading.services)) if reading.explicit_target else ""
    if decision == "negated":
        reading.args = Args(negated=True)
        if order_name != "restart":
            reading.note = f"OK — I won't {_VERB[order_name]} {who or 'anything'}."
    elif decision == "ask":
        reading.asked = True
        if reading.explicit_target:
            text = command_text(order_name, reading.services, reading.nodes)
            reading.note = f"Did you want me to {_VERB[order_name]} {who}? Say `{text}`."
            reading.offers = [text]
        else:
            names = ", ".join(dict.fromkeys(s.name for s in reading.services)) or "none configured"
            reading.note = (f"Did you want me to {_VERB[order_name]} a service? Name it: "
                            f"`{command_text(order_name, [], [])} SERVICE` (services: {names}).")
