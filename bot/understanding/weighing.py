"""What the words alone cannot weigh, after ``scoring`` has counted them: a flag named, a chart asked for (not
one already there), two things compared, context (after "since", who the answer is for, what is looked for in
the logs, a report of what someone did), a restart as a noun or in a what-if, a verb several orders share,
an order's verb opening a part, a state asked about ("is X up", "how's X"), a question about the bot itself,
small talk beside a question. Each rule serves a way of writing, never one sentence."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence

from bot.understanding import orders, scoring
from bot.understanding.settings_words import Setting
from bot.understanding.text import Token, stem
from bot.understanding.wordlists import common_english, english
from handlers.commands import COMMANDS

CHART_CUES = frozenset({"chart", "charts", "graph", "graphs", "plot", "plots", "visualize", "visualise",
                        "visualization", "sparkline", "trend", "trends", "trended", "png"})
CHART_PHRASES = (("over", "time"),)
# A measure "over the last 3 days" is its trend (not "logs over the last hour": only beside what a chart shows).
_OVER_A_WINDOW = (("over", "the", "last"), ("over", "the", "past"), ("over", "last"), ("over", "past"))
_CUE_STEMS = frozenset({"chart", "graph", "plot", "visual", "visualis", "visualiz", "trend", "sparklin"})
_SUBORDINATORS = frozenset({"since", "after", "because", "when", "once", "before", "if", "until", "from", "while"})
_MAIN_OPENERS = frozenset({"do", "does", "should", "can", "could", "will", "would", "is", "are", "what", "how",
                           "then"})
_NOUN_BEFORE = frozenset({"the", "a", "that", "this", "last", "latest", "recent", "previous", "next", "each",
                          "every", "another", "one", "any"})
# Verbs that undo; with the noun of an order as their object, they are the order that undoes it ("remove the
# silence on kimi", "cancel kimi's mute" are the unsilence).
UNDO_VERBS = frozenset({"remove", "cancel", "clear", "drop", "delete", "undo", "end", "lift", "stop", "kill",
                        "revoke", "unset", "override"})
UNDOES = {"silence": "unsilence"}
# "tell me if …", "check if …": the question, not a condition.
_ASKING_IF = frozenset({"me", "us", "check", "know", "see", "wonder", "wondering", "ask", "asking", "confirm",
                        "verify", "tell", "sure", "idea", "clue"})
# A question about doing an order opens with these and who would do it ("should i restart kimi", "do we bounce").
_ASK_DOING = frozenset({"should", "shall", "can", "could", "do", "would", "must"})
_DOERS = frozenset({"i", "we", "you", "u", "someone", "somebody", "anyone", "they"})
_NEGATORS = frozenset({"don't", "dont", "not", "never", "nobody", "no"})
# What logs do with what is looked for in them.
_SAYS = frozenset({"show", "shows", "say", "says", "mention", "mentions", "contain", "contains", "have", "has"})
# Who or what an answer is for ("for the audit folks", "for the demo deck"): context.
_AUDIENCE = frozenset("folks team people guys deck doc docs report meeting slides ticket review standup postmortem "
                      "retro writeup channel manager boss customer customers record records notes".split())
# Words that make a comparison of two things without naming them ("line up the env of both services").
_PAIR = frozenset({"both", "two", "each", "between"})
# What a service is (after "is": "is kimi up"): a state.
STATES = frozenset("up down ready healthy unhealthy ok okay alright fine alive dead back stuck hung wedged loaded "
                   "degraded broken responsive unresponsive reachable unreachable available online offline green red "
                   "operational serving happy unhappy sad stable unstable steady settled working".split())
# A picture already there: "this graph", "that chart", "grafana's panel".
_SHOWN = frozenset({"this", "that", "these", "those", "grafana", "dashboard", "your", "his", "her", "their"})
# After "how" (or "how's"), what asks how something is rather than how to do something.
_HOW_OF = frozenset({"is", "are", "was", "were", "things", "everything", "we", "it", "the", "both", "all"})
# Words of a what-if about a restart ("would restarting qwen help", "is a restart going to unstick it").
_WHAT_IF = frozenset({"if", "would", "will", "could", "going", "suppose", "supposing", "hypothetically", "downside",
                      "fix", "unstick", "help", "risk", "risky", "happens", "happen", "cost", "impact", "break"})


def chart_cue(t: Token, typos: bool = True) -> bool:
    """"chart", "graphs", "trended", or (``typos``) a misspelling of one ("chrat")."""
    if t.norm in CHART_CUES or t.stem in _CUE_STEMS:
        return True
    if (typos and len(t.norm) >= 4 and t.norm.isalpha() and t.norm not in english()
            and t.norm not in scoring.vocabulary() and t.norm not in common_english()):
        from rapidfuzz.distance import OSA

        return any(OSA.distance(t.norm, c, score_cutoff=1) <= 1 for c in CHART_CUES if len(c) >= 4)
    return False


@functools.cache
def shared_verbs() -> frozenset[str]:
    """Verbs of more than one order ("turn" alerts off or back on): they pick no order on their own."""
    seen: dict[str, int] = {}
    for c in COMMANDS:
        for v in c.verbs:
            seen[v] = seen.get(v, 0) + 1
    return frozenset(v for v, n in seen.items() if n > 1)


@functools.cache
def order_verbs() -> dict[str, str]:
    """Every order's verbs → the order (the first command that has it)."""
    out: dict[str, str] = {}
    for c in COMMANDS:
        for v in c.verbs:
            out.setdefault(v, c.name)
    return out


def adjust(scores: scoring.Scores, clause: Sequence[Token], setting: Setting | None, n_targets: int,
           names: set[int], question: bool = False) -> None:
    """What the words alone cannot weigh: a flag named, a chart asked for, two targets compared, context
    after "since", a restart word used as a noun or in a report, an order's verb opening a part, a question
    about the bot itself, small talk beside a question. Each step is one function below, applied in this
    order. ``question``: the clause ends with a question mark."""
    by = scores.by_command
    one_flag = _flag_named(scores, clause, setting)
    _charts(scores, clause)
    if by.get("compare"):
        # One flag across two services is that flag's answer (it lists each value), not a comparison.
        pair = (n_targets >= 2 and not one_flag) or any(
            len(h.words) > 1 and h.words[0] in _PAIR for h in scores.words_of("compare")) or (
            any(t.norm in _PAIR for t in clause) and not one_flag)
        by["compare"] = by["compare"] + 3.0 if pair else by["compare"] * 0.5
    _context_weighs_half(scores, clause)
    _statement_before_question(scores, clause)
    _purpose_weighs_half(scores, clause)
    _looked_for_in_logs(scores, clause)
    # Settings words as what changed or what is compared ("did anyone change the nccl env").
    if by.get("settings") and max(by.get("changes", 0.0), by.get("compare", 0.0)) >= 3.0:
        by["settings"] *= 0.5
    _undone(scores, clause)
    _prohibition(scores, clause)
    _restart_words(scores, clause, names, question)
    _shared_verb_object(scores, clause)
    _order_verb_first(scores, clause)
    _state_question(scores, clause, question, names)
    _how_many(scores, clause)
    _about_the_bot(scores, clause)
    # Thanks beside a question is politeness; beside only weak words ("morning all", "thanks all") and no name
    # it is the message ("hey, check kimi" asks).
    named = any(t.index in names for t in clause)
    if by.get("smalltalk") and any(v >= 1.0 or (v > 0 and named) for c, v in by.items() if c != "smalltalk"):
        by["smalltalk"] = by["smalltalk"] * 0.3


def _flag_named(scores: scoring.Scores, clause: Sequence[Token], setting: Setting | None) -> bool:
    """A flag or variable named in the clause is the question ("is NCCL_P2P_DISABLE set in the env"); where it
    is set ("in the env", "the unit's flags") only says where to look. Unless it is what changed ("how's
    throughput since we bumped the mem util")."""
    if setting is None or not setting.tokens & {t.index for t in clause}:
        return False
    by = scores.by_command
    first = min(setting.tokens)
    # After "since …", or after what changed ("who changed kimi's max model len"), it is context.
    subordinate = any(t.norm in _SUBORDINATORS and t.index < first for t in clause) or any(
        h.start < first and wt >= 3.0 for h in scores.words_of("changes") for c, wt in h.credits if c == "changes")
    if setting.value is not None:
        # Named by its value, a word of its own name is the setting's ("does kimi load from safetensors" is the
        # load format, not the loading).
        own = {t.index for t in clause if t.stem in {stem(p) for p in setting.name.lower().split("-") if len(p) >= 3}}
        for h in scores.hits:
            if h.start in own:
                for c, wt in h.credits:
                    by[c] = by.get(c, 0.0) - wt
        subordinate = subordinate and not own
    by["flag"] = by.get("flag", 0.0) + (1.5 if subordinate else 5.0)
    if not subordinate and by.get("settings"):
        by["settings"] *= 0.5
    return True


def _subordinator(clause: Sequence[Token], i: int) -> bool:
    """Whether the word at ``i`` opens context ("since the restart", "if it flaps again"); "if" after a verb of
    asking or knowing opens the question itself ("tell me if it's stable", "check if qwen's healthy")."""
    t = clause[i]
    if t.norm not in _SUBORDINATORS:
        return False
    return not (t.norm == "if" and i > 0 and clause[i - 1].norm in _ASKING_IF)


def _state_question(scores: scoring.Scores, clause: Sequence[Token], question: bool, names: set[int]) -> None:
    """"is it up", "are both models healthy", "is the 32b fine", "services ok?": a state word after "is"/"are",
    or ending a question, asks for the status."""
    sub = next((t.index for i, t in enumerate(clause) if _subordinator(clause, i)), 1 << 30)
    thing = any(h.start < sub and any(c != "status" and wt >= 3.0 for c, wt in h.credits) for h in scores.hits)
    if clause and clause[0].norm == "how" and (len(clause) <= 3 or clause[1].norm in _HOW_OF
                                                or clause[1].index in names) and not thing:
        # (not "how's qwen's latency looking", "how are we doing on latency": how that thing is)
        # "how's qwen", "how is gpu-b", "how are things": how something is.
        scores.by_command["status"] = scores.by_command.get("status", 0.0) + 1.5
        return
    # "it's stuck" in a question ("is it back? it's stable?", "tell me if it's stable"), not beside an order
    # ("kick qwen, it's stuck").
    asks = question or any((lead := _part_lead(clause, p)) is not None and lead.norm in orders.QUESTION_OPENERS
                           for p in dict.fromkeys(t.part for t in clause))
    for i, t in enumerate(clause):
        if t.norm not in STATES:
            continue
        before = [u for u in clause[max(0, i - 4):i] if u.part == t.part]
        if any(_subordinator(clause, j) for j in range(1, i) if clause[j].part == t.part):
            continue  # "what if we benchmarked kimi while it's serving": a state as context
        # "is it up", "it's stable", "kimi's back?": the state of something.
        if any(u.norm in ("is", "are", "was", "were", "isn't", "aren't") for u in before) or (
                question and i >= len(clause) - 2) or (before and before[-1].possessive and asks):
            scores.by_command["status"] = scores.by_command.get("status", 0.0) + 1.5
            return


def _how_many(scores: scoring.Scores, clause: Sequence[Token]) -> None:
    """"how many req/s is kimi serving", "how much vram …": what is counted is the question, not the state
    said of the service after it."""
    if len(clause) < 3 or clause[0].norm != "how" or clause[1].norm not in ("many", "much"):
        return
    counted = next((h for h in scores.hits if clause[2].index in h.tokens), None)
    if counted is not None:
        for c, wt in counted.credits:
            if scores.by_command.get(c, 0.0) > 0:  # not a chart weighed out for want of one asked for
                scores.by_command[c] += min(wt, 1.5)


def _about_the_bot(scores: scoring.Scores, clause: Sequence[Token]) -> None:
    """A question about the bot itself: help about its commands ("help restart", "what does `unlock` do",
    "syntax for silence" — not the verb in "would a restart help") makes the commands it names its topic;
    the bot's own record ("what have you restarted", "who used the bot to silence kimi") beats the orders."""
    by = scores.by_command
    lead = next((t.index for t in clause if t.norm not in orders.LEAD), None)
    if any(c == "help" and wt >= 3.0 and (h.words != ("help",) or h.start == lead)
           for h in scores.hits for c, wt in h.credits):
        for c in by:
            if c not in ("help", "flag"):  # a flag named is still answered with its value
                by[c] *= 0.5
    if by.get("audit", 0.0) >= 3.0:
        for c in ("restart", "restarts", "bench", "silence", "unsilence", "unlock"):
            if c in by:
                by[c] *= 0.5


def _charts(scores: scoring.Scores, clause: Sequence[Token]) -> None:
    """A chart only when one is asked for ("chart", "graph", "plot", "trended", "over time"), not one already
    there ("this graph shows …"); a misspelt "chart" only next to what a chart shows ("chrat throughput kimi")."""
    by = scores.by_command
    in_phrases = {i for h in scores.hits for i in h.tokens}
    shown = {b.index for a, b in itertools.pairwise(clause) if a.norm in _SHOWN}
    free = [t for t in clause if t.index not in in_phrases and t.index not in shown]
    norms = [t.norm for t in free]
    subject = any(by.get(c) for c in ("chart_throughput", "chart_bench", "chart_loads", "throughput"))
    cue = any(chart_cue(t, typos=subject) for t in free) or any(
        tuple(norms[i:i + len(p)]) == p for p in CHART_PHRASES for i in range(len(norms))) or (
        subject and any(tuple(norms[i:i + len(p)]) == p for p in _OVER_A_WINDOW for i in range(len(norms))))
    for name in ("chart_throughput", "chart_bench", "chart_loads"):
        if cue and (by.get(name) or name == "chart_throughput"):
            by[name] = by.get(name, 0.0) + 4.0
        elif not cue:
            # Without one, only a phrase about load durations ("how long did it take to load").
            # ("qwen's bench history" is the benchmarks over their dates.)
            phrases = sum(w for h in scores.words_of(name) for c, w in h.credits if c == name and w >= 3.0
                          and len(h.words) > 1 and (name == "chart_loads" or "history" in h.words))
            by[name] = phrases if name in ("chart_loads", "chart_bench") else 0.0


def _context_weighs_half(scores: scoring.Scores, clause: Sequence[Token]) -> None:
    """What follows "since", "after", "because" … is context, not the question ("is kimi slower since the
    nccl change?"): its words weigh half. A question word opening the sentence ("when did …") is not one; the
    context ends at the next part or question ("if qwen OOMs again, do we restart it")."""
    by = scores.by_command
    sub_at = next((i for i, t in enumerate(clause) if _subordinator(clause, i) and (i > 0 or t.norm != "when")),
                  None)
    if sub_at is None:
        return
    # After an order's verb that opens the part ("restart kimi when the shards are done loading"), the
    # condition runs to the end of the part: its own verb ("are") opens no main question.
    verb = _order_lead(clause, clause[sub_at].part)
    after_order = verb is not None and verb.index < clause[sub_at].index
    end = next((i for i in range(sub_at + 2, len(clause)) if clause[i].part != clause[sub_at].part
                or (clause[i].norm in _MAIN_OPENERS and not after_order)), len(clause))
    span = {t.index for t in clause[sub_at + 1:end]}
    for h in scores.hits:
        if h.start in span:
            for c, wt in h.credits:
                by[c] = by.get(c, 0.0) - wt / 2


def _part_lead(clause: Sequence[Token], part: int) -> Token | None:
    return next((t for t in clause if t.part == part and t.norm not in orders.LEAD), None)


def _statement_before_question(scores: scoring.Scores, clause: Sequence[Token]) -> None:
    """A statement, then a question in the same sentence ("kimi was flapping overnight, can someone tell me if
    it's stable now"): the question decides, the statement before it weighs half."""
    parts = list(dict.fromkeys(t.part for t in clause))
    asks = next((p for p in parts[1:] if (lead := _part_lead(clause, p)) is not None
                 and lead.norm in orders.QUESTION_OPENERS), None)
    if asks is None:
        return
    verbs = order_verbs()
    for p in parts[:parts.index(asks)]:
        lead = _part_lead(clause, p)
        if lead is None or lead.norm in orders.QUESTION_OPENERS or lead.norm in verbs:
            return  # a question or an order first: it is the one that asks
    span = {t.index for t in clause if t.part < asks}
    for h in scores.hits:
        if h.start in span:
            for c, wt in h.credits:
                scores.by_command[c] = scores.by_command.get(c, 0.0) - wt / 2


def _purpose_weighs_half(scores: scoring.Scores, clause: Sequence[Token]) -> None:
    """"for the audit folks", "for the postmortem doc": who the answer is for is context, not the question."""
    by = scores.by_command
    for i, t in enumerate(clause):
        if t.norm != "for":
            continue
        span = [u for u in clause[i + 1:] if u.part == t.part]
        if any(u.norm in _AUDIENCE for u in span):
            idx = {u.index for u in span}
            audience = {u.index for u in span if u.norm in _AUDIENCE}
            for h in scores.hits:
                if h.start in idx:
                    # The audience itself ("the postmortem doc") is no topic at all.
                    share = 1.0 if set(h.tokens) <= audience else 0.5
                    for c, wt in h.credits:
                        by[c] = by.get(c, 0.0) - wt * share


def _looked_for_in_logs(scores: scoring.Scores, clause: Sequence[Token]) -> None:
    """"does qwen's log show the model loading", "what does the journal say about the OOM": what is looked for
    in the logs weighs half."""
    logs = [h.start for h in scores.words_of("logs") if dict(h.credits).get("logs", 0.0) >= 3.0]
    if not logs:
        return
    verb = next((t.index for t in clause if t.index > min(logs) and t.norm in _SAYS), None)
    if verb is None:
        return
    for h in scores.hits:
        if h.start > verb:
            for c, wt in h.credits:
                scores.by_command[c] = scores.by_command.get(c, 0.0) - wt / 2


def _restart_words(scores: scoring.Scores, clause: Sequence[Token], names: set[int], question: bool) -> None:
    """"after the restart", "the last kimi restart": a restart as a noun is not one; "don't restart" and a what-if
    ("would a restart help", "what if I restart qwen", "is a restart going to fix it") are about restarts."""
    by = scores.by_command
    what_if = any(t.norm in _WHAT_IF and not (t.norm == "if" and i > 0 and clause[i - 1].norm in _ASKING_IF)
                  for i, t in enumerate(clause))  # not "tell me if it's back"
    for h in scores.hits:
        credited = {c for c, wt in h.credits if wt >= 3.0}
        if not credited & {"restart", "restarts"} or len(h.words) != 1:
            continue
        pos = next((i for i, t in enumerate(clause) if t.index == h.start), 0)
        before = next((t.norm for t in reversed(clause[:pos]) if t.index not in names), "")  # names skipped
        if before in _NOUN_BEFORE:
            by["restart"] = by.get("restart", 0.0) - 1.5
        elif before in _NEGATORS:
            by["restarts"] = by.get("restarts", 0.0) + 2.0
        if what_if:
            by["restarts"] = by.get("restarts", 0.0) + 2.0
            what_if = False
        word = clause[pos]
        asked = question and word.part == clause[-1].part  # the part the question mark ends
        if word.norm.endswith("ed") and not asked and not any(
                t.norm in orders.QUESTION_OPENERS for t in clause[:pos] if t.part == word.part):
            # "<@bob> restarted kimi, can you confirm it's healthy": a report of what someone did; the
            # question after it decides.
            for c, wt in h.credits:
                by[c] = by.get(c, 0.0) - wt / 2


def _prohibition(scores: scoring.Scores, clause: Sequence[Token]) -> None:
    """A part that opens with a negation is a prohibition ("don't touch kimi", "ne touche pas à kimi, ne le
    redémarre pas", "never change qwen's flags"): what it forbids is no question about it (only an order's words
    keep their weight: the order is what is forbidden)."""
    confirm = {c.name for c in COMMANDS if c.confirm or c.family is not None}
    for part in dict.fromkeys(t.part for t in clause):
        lead = _part_lead(clause, part)
        if lead is None or (lead.norm not in _NEGATORS and not lead.norm.endswith("n't")):
            continue
        for h in scores.hits:
            if clause_part(clause, h.start) == part:
                for c, wt in h.credits:
                    if c not in confirm:
                        scores.by_command[c] = scores.by_command.get(c, 0.0) - wt / 2


def _undone(scores: scoring.Scores, clause: Sequence[Token]) -> None:
    """A verb that undoes, with an order's noun as its object, is the order that undoes it: "remove the silence
    on kimi", "cancel kimi's mute" (``UNDOES``)."""
    by = scores.by_command
    part_of = {t.index: t.part for t in clause}
    for verb in (t for t in clause if t.norm in UNDO_VERBS):
        for h in scores.hits:
            if h.start <= verb.index or verb.index in h.tokens or part_of.get(h.start) != verb.part:
                continue
            for c, wt in h.credits:
                if c in UNDOES and wt >= 3.0:
                    by[c] = by.get(c, 0.0) - wt
                    by[UNDOES[c]] = by.get(UNDOES[c], 0.0) + wt + 2.0


def _shared_verb_object(scores: scoring.Scores, clause: Sequence[Token]) -> None:
    """A verb several orders share ("kick") is the order its object names: "kick the bench" is the benchmark,
    "kick kimi" a restart."""
    by = scores.by_command
    part_of = {t.index: t.part for t in clause}
    for h in scores.hits:
        owners = {c.name for c in COMMANDS if c.confirm and h.words[0] in c.verbs} if len(h.words) == 1 else set()
        if len(owners) < 2:
            continue
        credited = {c for c, _ in h.credits}
        objects = {c for o in scores.hits if o.start > h.start and part_of.get(o.start) == part_of.get(h.start)
                   for c, wt in o.credits if wt >= 3.0 and c in owners - credited}
        if objects:
            for c, wt in h.credits:
                by[c] = by.get(c, 0.0) - wt


def _order_lead(clause: Sequence[Token], part: int) -> Token | None:
    """The order's verb that opens ``part`` — after the lead-in words, "can you", or a question about doing it
    ("should i restart kimi …", "do we bounce qwen …") — if one does."""
    toks = [t for t in clause if t.part == part]
    lead = next((t for t in toks if t.norm not in orders.LEAD and t.norm not in orders.POLITE
                 and t.norm not in orders.YOU), None)
    if lead is not None and lead.norm in _ASK_DOING:
        rest = [t for t in toks if t.index > lead.index]
        lead = rest[1] if len(rest) >= 2 and rest[0].norm in _DOERS else None
    if lead is not None and lead.norm in order_verbs() and lead.norm not in shared_verbs():
        return lead
    return None


def _order_verb_first(scores: scoring.Scores, clause: Sequence[Token]) -> None:
    """An order's verb opening a part: "restart kimi when the load is done" is about the restart; so is "should
    i restart kimi or wait for the load" — an alternative after the order weighs half."""
    by = scores.by_command
    verbs = order_verbs()
    boosted: set[str] = set()
    for part in dict.fromkeys(t.part for t in clause):
        lead = _order_lead(clause, part)
        if lead is not None and by.get(verbs[lead.norm]) and verbs[lead.norm] not in boosted:
            by[verbs[lead.norm]] += 2.0
            boosted.add(verbs[lead.norm])
            _said_before(scores, clause, part, lead)
            alt = next((t.index for t in clause if t.part == part and t.index > lead.index and t.norm == "or"), None)
            if alt is not None:
                for h in scores.hits:
                    if h.start > alt and clause_part(clause, h.start) == part:
                        for c, wt in h.credits:
                            by[c] = by.get(c, 0.0) - wt / 2


# What may follow an order's verb in a part that points back at what was said before it ("bounce it pls").
_BACK_REFERENCE = frozenset({"it", "them", "that", "this", "both", "please", "pls", "now", "asap", "again", "too",
                             "then", "already", "just", "quickly"})


def _said_before(scores: scoring.Scores, clause: Sequence[Token], part: int, lead: Token) -> None:
    """"kimi stuck at cuda graph capture for an hour, bounce it": the order's verb with only "it" after it, in
    a part after a statement, is what is asked; the statement before it is why (its words weigh half)."""
    rest = [t for t in clause if t.part == part and t.index > lead.index]
    if lead.part == clause[0].part or not rest or any(t.norm not in _BACK_REFERENCE for t in rest):
        return
    if any(_order_lead(clause, p) is not None for p in {t.part for t in clause if t.part < part}):
        return  # "restart kimi, then bench it": two orders, the first one first
    for h in scores.hits:
        if clause_part(clause, h.start) is not None and (clause_part(clause, h.start) or 0) < part:
            for c, wt in h.credits:
                scores.by_command[c] = scores.by_command.get(c, 0.0) - wt / 2


def clause_part(clause: Sequence[Token], index: int) -> int | None:
    """The part of the token at ``index``."""
    return next((t.part for t in clause if t.index == index), None)
