"""Is an order an order? A restart (and a benchmark run, a silence, an unlock) happens only when the
message is one: an imperative, not struck through, quoted or in code, with no question, hesitation,
condition or time qualifier, and no negation anywhere. Everything else about it is information, a promise
not to ("don't restart kimi"), or, in doubt, a question back ("Did you want me to restart kimi?").
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import Literal

from bot.understanding.text import Clause, Token, Words

Decision = Literal["order", "info", "ask", "negated"]

NEGATIONS = frozenset(
    "don't dont do-not never nobody noone not no shouldn't shouldnt mustn't mustnt won't wont can't cant cannot "
    "avoid stop hold nvm nevermind nah nope naw refrain".split()
)
# Another place than the cluster the bot runs: an order for it is not one for ours.
_ELSEWHERE = frozenset({"staging", "stage", "canary", "sandbox", "preprod", "pre-prod", "dev", "qa"})
_PLACES = frozenset({"cluster", "clusters", "box", "node", "region", "env", "environment", "site", "dc", "one"})
# A sentence of only these after an order makes it wait ("restart kimi. wait", "… hold on").
_WAIT = frozenset({"wait", "hold", "on", "hang", "sec", "second", "hmm", "hmmm", "um", "uh", "actually", "one", "a",
                   "moment", "mo", "tho", "though", "ok", "oh"})
# Beside a negation in a sentence of its own after an order, they take it back ("actually, don't").
_TAKE_BACK = frozenset({"actually", "wait", "hmm", "um", "oh", "please", "pls", "on", "second", "thought",
                        "thoughts", "never", "mind", "do", "it", "that", "lol", "haha", "jk", "better", "rather",
                        "or", "maybe", "forget"})
# Said after an order, they take it back.
RETRACTIONS = (("actually", "no"), ("never", "mind"), ("nvm",), ("nevermind",), ("scratch", "that"),
               ("said", "no", "one"), ("said", "nobody"), ("said", "no"), ("false", "alarm"), ("no", "longer"),
               ("not", "needed"), ("no", "restart", "needed"),
               ("cancel", "that"), ("hold", "off"), ("no", "wait"), ("oh", "wait"), ("wait", "no"), ("ignore", "that"),
               ("disregard",), ("jk",), ("nope",), ("nah",), ("not", "now"), ("not", "yet"), ("not", "today"),
               ("not", "tonight"), ("not", "really"), ("not", "right", "now"), ("just", "kidding"), ("kidding",),
               ("joking",), ("/s",), ("forget", "it"), ("forget", "that"), ("forget", "about", "it"), ("on", "hold"))
HESITATIONS = frozenset(
    "maybe perhaps idk unsure possibly probably might thinking considering wonder wondering dunno overkill "
    "thoughts reckon guess suppose hmm hmmm um umm worth agree wdyt wyt objections opinions lol lmao rofl kinda "
    "sorta tbd alternatively hypothetically".split()
)
# Emoji that doubt (Slack shortcodes and the Unicode names of the pictographs).
DOUBT_EMOJI = frozenset({"thinking_face", "thinking", "shrug", "man-shrugging", "woman-shrugging", "person_shrugging",
                         "confused", "face_with_raised_eyebrow", "raised_eyebrow", "grimacing", "question",
                         "grey_question", "interrobang", "thinking face", "person shrugging",
                         "face with raised eyebrow", "grimacing face", "black question mark ornament",
                         "confused face", "white question mark ornament"})
# Emoji that hold an order back: a "no" (⛔, 🚫, ❌, 🛑, ✋) or a later (🔜, ⏳, a clock, 💤).
_HOLD_EMOJI = frozenset({"no_entry", "no_entry_sign", "x", "octagonal_sign", "stop_sign", "raised_hand", "hand",
                         "raised_back_of_hand", "soon", "hourglass", "hourglass_flowing_sand", "zzz", "sleeping",
                         "no entry", "no entry sign", "cross mark", "octagonal sign", "raised hand",
                         "soon with rightwards arrow above", "hourglass with flowing sand", "sleeping symbol",
                         "alarm clock", "stopwatch", "timer clock", "mantelpiece clock", "alarm_clock", "timer_clock",
                         "mantelpiece_clock"})


def doubting_emoji(emoji: Sequence[str]) -> bool:
    """An emoji that doubts ("restart kimi :thinking_face:") or holds the order back (":no_entry:", ":soon:")."""
    return any(e in DOUBT_EMOJI or e in _HOLD_EMOJI or e.startswith(("clock", "clock face")) for e in emoji)


HESITATION_PHRASES = (("not", "sure"), ("i", "think"), ("should", "we"), ("do", "we", "need"),
                      ("we", "could"), ("we", "might"), ("do", "i", "need"), ("good", "idea"), ("makes", "sense"),
                      ("what", "do", "you", "think"), ("y/n",), ("yes", "or", "no"), ("sort", "of"),
                      ("kind", "of"), ("worst", "case"), ("in", "theory"))
# When, or on what condition: an order for later is not one now ("now", "asap" are not qualifiers).
QUALIFIERS = frozenset(
    "tomorrow tonight later after afterwards once if unless until till when whenever before eventually "
    "monday tuesday wednesday thursday friday saturday sunday weekend morning evening afternoon midnight noon "
    "next soon shortly eod eow cob overnight tmrw tmr tmrw tomorow tommorow tommorrow tonite 2moro "
    "whenever someday sometime pending awaiting during assuming provided providing iff contingent momentarily "
    "within".split()
)
QUALIFIER_PHRASES = (("top", "of", "the", "hour"), ("end", "of", "day"), ("end", "of", "the", "day"),
                     ("first", "thing"), ("in", "a", "bit"), ("in", "a", "while"), ("at", "some", "point"),
                     ("this", "evening"), ("later", "today"), ("when", "possible"), ("in", "the", "morning"),
                     ("after", "hours"), ("out", "of", "hours"), ("off", "hours"), ("next", "window"),
                     ("at", "lunch"), ("over", "lunch"), ("by", "lunch"), ("this", "week"), ("end", "of", "week"),
                     ("this", "arvo"), ("off", "peak"), ("offpeak",), ("in", "case"), ("at", "your", "convenience"),
                     ("some", "time"), ("should", "it"), ("this", "month"), ("no", "rush"), ("no", "hurry"),
                     ("as", "long", "as"), ("so", "long", "as"), ("given", "that"), ("on", "condition"),
                     ("in", "the", "event"), ("should", "the"), ("should", "that"), ("should", "this"),
                     ("subject", "to"), ("down", "the", "line"))
_COVERS = frozenset({"during", "until", "till", "til", "for", "through", "thru"})
_CONDITIONS = frozenset({"if", "unless", "when", "whenever", "once", "after", "before", "until", "till"})
_LENGTH = frozenset({"for", "through", "thru", "till", "until", "til"})  # "silence kimi for tonight"
# A label before an order that is still the person's own order ("urgent: restart kimi").
_URGENT = frozenset({"urgent", "asap", "important", "action", "request", "req", "prio", "p0", "p1", "sev1", "sev2",
                     "emergency", "critical", "help", "ops", "oncall", "incident"})
_SHORT = 6  # words: a sentence this short after an order only qualifies it
# What "post-…"/"pre-…" put an order after or before ("post-lunch", "pre-demo").
_EVENTS = frozenset("lunch standup demo deploy deployment meeting maintenance bench benchmark load migration "
                    "upgrade launch release review call sync weekend holiday incident".split())
_NUMBER_WORDS = frozenset("one two three four five six seven eight nine ten fifteen twenty thirty forty fifty sixty "
                          "several".split())
_CLOCK = re.compile(r"^\d{1,2}(?:am|pm|h)$")  # "5pm", "17h"
# "at 5pm", "by 17:00", "around 3", "at the top of the hour": a time the order is for.
_AT = frozenset({"at", "by", "around", "about"})
_TIME_NOUNS = frozenset({"top", "end", "start", "beginning", "half", "bottom"})
_TIME_WORDS = frozenset({"min", "mins", "minute", "minutes", "hour", "hours", "hr", "hrs", "sec", "secs", "second",
                         "seconds", "moment", "bit", "while", "day", "days", "week", "weeks", "pm", "am", "noon"})
# What a number "at" measures when it is no time ("it's at 0 tok/s", "stuck at 40 percent").
_MEASURES = frozenset({"tok/s", "tokens/s", "t/s", "tokens", "tok", "tps", "rps", "req/s", "percent", "pct", "gb",
                       "gib", "mb", "mib", "ms", "c", "w", "watts", "degrees", "shards", "requests", "reqs"})
# Words that open a question (at the start of a clause).
QUESTION_OPENERS = frozenset(
    "why when who whom whose how what which where did does do has have had was were is are should shall "
    "may might would will can could if whats what's".split()
)
# Words that may come before the verb of an imperative.
LEAD = frozenset(
    "hey hi ok okay so and but now then pls plz please kindly just go ahead yes yeah yep alright right "
    "also force quickly quick again bot inferbot /inferbot team folks guys yo oi sup hello".split()
)
POLITE = frozenset({"can", "could", "would", "will"})
_TELL = frozenset({"tell", "ping", "notify", "let", "report", "dm", "update", "message", "post"})
LIGHT_VERBS = frozenset({"do", "trigger", "issue", "perform", "initiate", "execute", "fire", "kick"})
# A word right after the verb that makes it a noun ("restart of kimi scheduled …", "restart is pending").
NOUN_AFTER = frozenset({"of", "is", "was", "will", "would", "has", "had", "went", "took", "happened", "scheduled",
                        "planned", "pending", "done", "finished", "completed", "ran", "failed", "succeeded",
                        "worked", "started"})
YOU = frozenset({"you", "u", "ya"})
# What may stand beside a negation in a part of its own that governs the next one ("do not, under any
# circumstances, restart kimi", "never — ever — bounce qwen", "please, please don't, …").
_DANGLING = frozenset({"do", "please", "pls", "plz", "ever", "really", "seriously", "just", "absolutely",
                       "definitely", "again", "repeat", "i", "and", "but", "so", "whatever", "you"})


def _has_phrase(tokens: Sequence[Token], phrase: tuple[str, ...]) -> bool:
    norms = [t.norm for t in tokens]
    n = len(phrase)
    return any(tuple(norms[i:i + n]) == phrase for i in range(len(norms) - n + 1))


def _part(words: Words, verb: Token) -> list[Token]:
    return [t for t in words.tokens if t.part == verb.part]


def _negation(t: Token) -> bool:
    """"don't", "wouldn't", "shouldnt", "never", "not" …"""
    return t.norm in NEGATIONS or t.norm.endswith("n't") or (t.norm.endswith("nt") and t.norm[:-2] in (
        "wouldn", "couldn", "shouldn", "don", "didn", "doesn", "mustn", "won", "can", "isn", "wasn"))


def negated(words: Words, verb: Token) -> bool:
    """A negation next to the verb ("don't restart kimi", "kimi nicht neu starten", "kimiは再起動しないで"), or
    a retraction after it anywhere ("restart kimi… actually no, wait", "~bounce qwen~ nvm")."""
    part = _part(words, verb)
    # "… or not?" is a doubt, not a negation.
    doubt = {b.index for a, b in itertools.pairwise(words.tokens) if a.norm == "or" and b.norm == "not"}
    if any(_negation(t) for t in part if t.index != verb.index and t.index not in doubt):
        return True
    if any(_has_phrase(part, p) for p in (("hold", "off"), ("no", "need"), ("no", "reason"))):
        return True
    if _dangling_negation(words, verb):
        return True
    after = [t for t in words.tokens if t.index > verb.index]
    if any(_has_phrase(after, r) for r in RETRACTIONS):
        return True
    # A later sentence, or a later part of the verb's, that is only a negation ("restart kimi. actually, don't",
    # "… no.", "restart kimi, please don't", "kimi neu starten, bitte nicht").
    later = [words.clause_tokens(c.index) for c in words.clauses[verb.clause + 1:]]
    parts: dict[int, list[Token]] = {}
    for t in words.clause_tokens(verb.clause):
        if t.part > verb.part:
            parts.setdefault(t.part, []).append(t)
    return any(_only_a_take_back(toks) for toks in [*later, *parts.values()])


def _only_a_take_back(toks: Sequence[Token]) -> bool:
    """Words that only say no ("actually, don't", "please don't", "better not", "no"); "hold on" waits."""
    return (bool(toks) and all(_negation(t) or t.norm in _TAKE_BACK for t in toks) and any(_negation(t) for t in toks)
            and not all(t.norm in _WAIT for t in toks))


def _dangling_negation(words: Words, verb: Token) -> bool:
    """A part before the verb's, in its sentence, that is only a negation ("do not", "never", "don't") governs
    what follows it: "do not, under any circumstances, restart kimi"."""
    parts: dict[int, list[Token]] = {}
    for t in words.clause_tokens(verb.clause):
        if t.part < verb.part:
            parts.setdefault(t.part, []).append(t)
    return any(any(_negation(t) and t.norm != "no" for t in toks)
               and all(_negation(t) or t.norm in _DANGLING for t in toks) for toks in parts.values())


def _clock_time(tokens: Sequence[Token]) -> bool:
    """ "in 10 min", "in an hour", "at 5pm", "at 13:00", "at the top of the hour": a time the order is for."""
    for a, b, c in itertools.zip_longest(tokens, tokens[1:], tokens[2:]):
        if b is None:
            break
        if a.norm == "in" and (b.norm[:1].isdigit() or b.norm in ("a", "an", "half", "few", "bit", "couple")
                               or b.norm in _NUMBER_WORDS):
            return True
        measure = b.norm.endswith("%") or (c is not None and c.norm in _MEASURES)  # "it's at 0 tok/s", "at 95%"
        if a.norm in _AT and b.norm[:1].isdigit() and not measure:
            return True
        if a.norm in _AT and b.norm == "the" and c is not None and c.norm in _TIME_NOUNS:
            return True
    return False


def _imperative(clause: Sequence[Token], verb: Token, is_name: set[int]) -> tuple[bool, bool, bool]:
    """(the verb opens the clause as an imperative, it does so after "can/could/would you", after a light verb
    whose noun it is: "do a restart of kimi", "trigger a restart on qwen")."""
    polite = False
    light = False
    for t in clause:
        if t.index == verb.index:
            return True, polite, light
        if t.norm in LEAD or t.index in is_name:
            continue
        if t.norm in LIGHT_VERBS and not light:
            light = True
            continue
        if light and t.norm in ("a", "an", "the", "off"):  # "kick off a restart"
            continue
        if t.norm in POLITE:
            polite = True
            continue
        if polite and t.norm in YOU:
            continue
        return False, False, False
    return False, False, False


def decide(words: Words, verb: Token, is_name: set[int], allow_time: bool = False, to_other: bool = False
           ) -> Decision:
    """Whether the order whose verb is ``verb`` is one. ``is_name``: indices of tokens that name a target.

    ``allow_time``: durations belong to the order (a silence "for 2 h"), so only conditions count.
    ``to_other``: the message is addressed to another person (it starts with their mention): never an order.
    """
    if negated(words, verb):
        return "negated"
    if to_other:
        return "info"
    if verb.marked:
        return "info"  # quoted, in code or struck through: said about, not said
    if verb.norm.endswith(("ed", "ing")) or (verb.norm.endswith("s") and not verb.norm.endswith("ss")):
        return "info"  # "kimi restarted?", "restarts of kimi": not the imperative
    if _labelled(words, verb, is_name):
        return "ask"  # "bob: restart kimi", "todo: restart kimi": a line about an order, not one
    clause_info: Clause = words.clauses[verb.clause]
    part = _part(words, verb)
    imperative, polite, light = _imperative(part, verb, is_name)
    after = next((t for t in part if t.index > verb.index and t.index not in is_name), None)
    if imperative and not light and after is not None and after.norm in NOUN_AFTER:
        return "ask"  # "restart of kimi scheduled for 5pm": the restart as a noun
    if not imperative:
        opener = next((t for t in part if t.norm not in LEAD and t.index not in is_name), None)
        if opener is not None and opener.norm in QUESTION_OPENERS:
            return "info"  # "should we restart kimi", "why did kimi restart", "can I restart qwen"
        return "info" if clause_info.question else "ask"  # "kimi needs a restart", "let's restart kimi"
    if _for_later(words, verb, allow_time):
        return "ask"  # an order for later: not now (the bot does not schedule); it asks
    return _doubt(words, verb, polite)


def reason_doubts(words: Words, verb: Token, start: int) -> Decision:
    """A silence's reason (the words from ``start``, after its length) may still take the order back ("…, not
    now", "… nvm"), doubt it ("…?", "… maybe") or put it later ("… if it flaps again", "… tonight"); a plain
    negation in it is the reason itself ("no pages during the upgrade")."""
    reason = [t for t in words.tokens if t.index >= start]
    if any(_has_phrase(reason, r) for r in RETRACTIONS):
        return "negated"
    pieces: dict[tuple[int, int], list[Token]] = {}
    for t in reason:
        pieces.setdefault((t.clause, t.part), []).append(t)
    if any(_only_a_take_back(toks) for toks in pieces.values()):
        return "negated"  # "silence kimi 2h, please don't", "… . no"
    # ("during", "until" say what the silence covers: "silence kimi 2h, no pages during the driver upgrade")
    if any(((t.norm in _CONDITIONS or t.norm in QUALIFIERS) and t.norm not in _COVERS
            and not (t.norm in _CONDITIONS and _of_the_work(t, pieces))) or _ish(t.norm) for t in reason):
        return "ask"
    if (any(_has_phrase(reason, q) for q in QUALIFIER_PHRASES if q[:2] != ("in", "case")) or _clock_time(reason)
            or _around_an_event(reason)):
        return "ask"
    if reason and reason[0].norm == "or":
        return "ask"  # "silence kimi 2h or not", "… or wait"
    if any(c.question for c in words.clauses[verb.clause:]) or doubting_emoji(words.emoji):
        return "ask"
    if any(t.norm in HESITATIONS for t in reason) or any(_has_phrase(reason, h) for h in HESITATION_PHRASES):
        return "ask"
    return "order"


# The work a silence is for, named in its reason: a condition after it is the work's ("silence kimi 90 min restart
# gpus after the status logs are saved"), not the silence's.
_WORK = frozenset({"restart", "reboot", "bounce", "upgrade", "update", "patch", "swap", "replace", "reinstall",
                   "deploy", "migrate", "drain", "reset", "rebuild", "flash", "reseat", "install", "fix", "reload",
                   "restarting", "rebooting", "upgrading", "updating", "patching", "swapping", "replacing"})


def _of_the_work(t: Token, pieces: dict[tuple[int, int], list[Token]]) -> bool:
    """``t`` follows, in its piece of the reason, a word naming the work the silence is for."""
    piece = pieces.get((t.clause, t.part), [])
    return any(w.norm in _WORK for w in piece if w.index < t.index)


def _labelled(words: Words, verb: Token, is_name: set[int]) -> bool:
    """The order's part follows a label and a colon ("bob: restart kimi", "idea: bounce qwen", "q: …"): someone's
    line or a note. A name ("kimi: restart it") or an urgency ("urgent: restart kimi") is no such label."""
    label = [t for t in words.clause_tokens(verb.clause) if t.part == verb.part - 1]
    if not label or verb.part - 1 not in words.labels or len(label) > 4:
        return False
    first = next((t for t in words.clause_tokens(verb.clause) if t.part == verb.part and t.norm not in LEAD), None)
    if first is None or first.index != verb.index:
        return False  # the verb does not open what follows the colon
    return not any(t.index in is_name or t.norm in _URGENT or t.norm in LEAD for t in label)


def _for_later(words: Words, verb: Token, allow_time: bool) -> bool:
    """A condition or a time in the verb's sentence, or in a next one that starts with one ("restart kimi.
    after the load"). ``allow_time``: a length is the order's own ("silence kimi for tonight"), a time to start
    it is not ("silence kimi tonight")."""
    scope = list(words.clause_tokens(verb.clause))
    if verb.clause + 1 < len(words.clauses):
        nxt = words.clause_tokens(verb.clause + 1)
        # A next sentence that opens with a time or is only a few words ("restart kimi. at noon", "… in 5 mins").
        if nxt and (nxt[0].norm in QUALIFIERS or len(nxt) <= _SHORT):
            scope += nxt
    if _around_an_event(scope):
        return True  # "restart kimi post-lunch", "… pre-demo" (read as one word)
    # "restart kimi and tell me when it's back": what follows a request to be told is about the telling.
    told = next((t.index for t in scope if t.index > verb.index and t.norm in _TELL), None)
    scope = [t for t in scope if told is None or t.index < told]
    # A time in a part before the order's ("in an hour, restart kimi"; not "stuck in a loop, restart it").
    before = [t for t in scope if t.part < verb.part]
    ahead = _clock_time(before) and any(t.norm in _TIME_WORDS or t.norm[:1].isdigit() for t in before)
    if allow_time:
        length = next((t.index for t in scope if t.index > verb.index and t.norm in _LENGTH), None)
        return ahead or any(t.norm in _CONDITIONS or (t.norm in QUALIFIERS and (length is None or t.index < length))
                            for t in scope)
    later = [t for t in scope if t.index > verb.index]
    return (any(t.norm in QUALIFIERS or _CLOCK.match(t.norm) or _ish(t.norm) for t in scope) or _clock_time(later)
            or ahead
            or any(_has_phrase(scope, q) for q in QUALIFIER_PHRASES))


def _around_an_event(tokens: Sequence[Token]) -> bool:
    """ "post-lunch", "pre-demo" (or "predemo", one word): after or before something that happens."""
    return any(a.norm in ("post", "pre") and b.norm in _EVENTS for a, b in itertools.pairwise(tokens)) or any(
        t.norm.startswith(("post", "pre")) and t.norm.removeprefix("post").removeprefix("pre") in _EVENTS
        for t in tokens)


def _ish(word: str) -> bool:
    """ "soonish", "laterish", "5ish", "noon-ish": a time, roughly."""
    base = word.removesuffix("ish").rstrip("-")
    return word.endswith("ish") and bool(base) and (base in QUALIFIERS or base.isdigit() or bool(_CLOCK.match(base)))


def _doubt(words: Words, verb: Token, polite: bool) -> Decision:
    """Doubt anywhere from the verb's sentence on ("restart kimi maybe? idk"), an alternative after it ("restart
    kimi or is that overkill", "… or qwen"), or a question after it ("restart kimi. is that ok?")."""
    rest = [t for t in words.tokens if t.clause >= verb.clause]
    if doubting_emoji(words.emoji):
        return "ask"  # "restart kimi :thinking_face:"
    if any(t.norm in HESITATIONS for t in rest) or any(_has_phrase(rest, h) for h in HESITATION_PHRASES):
        return "ask"
    if any(t.norm == "or" for t in rest if t.index > verb.index):
        return "ask"
    part = [t for t in rest if t.clause == verb.clause]
    if any(t.norm in _ELSEWHERE for t in part) or any(
            a.norm in ("other", "another", "different") and b.norm in _PLACES for a, b in itertools.pairwise(part)):
        return "ask"  # "restart kimi in staging", "… on the other cluster": not the service this bot runs
    if words.clauses[verb.clause].question and not polite:
        return "ask"  # "restart kimi?"
    if any(c.question for c in words.clauses[verb.clause + 1:]):
        return "ask"  # "restart kimi. or is that overkill?"
    if any(all(t.norm in _WAIT for t in words.clause_tokens(c.index)) for c in words.clauses[verb.clause + 1:]):
        return "ask"  # "restart kimi. wait", "… hold on"
    return "order"
