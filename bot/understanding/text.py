"""A message's words, once: normalised, stemmed, split into clauses, each word knowing how it was written.

Every later step (names, intents, orders, arguments) reads these tokens and never the raw text again.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, replace

from bot.understanding.markup import Message

_LATIN = r"A-Za-z0-9_\u00C0-\u024F"
# A word: letters, digits and the joiners of names, paths and flags (gpu-a, kimi-k2.5, /shared/x, tok/s,
# --max-model-len, NCCL_PROTO); its last character is a letter or digit, so "kimi." and "gpu-a?" are words.
_TOKEN = re.compile(
    r"(?P<enum>(?<![\w.])(?:\d{1,2}|[a-e])\))|"  # "1) is kimi up 2) …", "a) … b) …": an enumeration ends a part
    rf"(?P<word>(?:--?|/)?[{_LATIN}](?:[{_LATIN}./+'-]*[{_LATIN}])?%?)"
    r"|(?P<cjk>[\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+)"
    r"|(?P<punct>->|=>|[?？!！.。;；=…,，、\n:—–→\u2063])"  # an arrow parts like a comma ("hung -> restart")
)
_ENDS = {"?", "？", "!", "！", ".", "。", ";", "；", "\n", "…"}  # a comma, a colon or a dash ends a part only
_QUESTION = {"?", "？"}
# Words that open a new question in the same sentence ("kimi status? also gpus", "… btw what about qwen").
_CLAUSE_OPENERS = frozenset({"also", "btw", "plus", "separately", "oh", "additionally"})
# "is kimi up and what's its tp": "and" before a question word opens a second question in the same sentence.
_JOINS = frozenset({"and", "but", "then", "&"})
_ASKS = frozenset(
    "what what's whats how how's hows who who's whos when where which why is are was were does do did can could will "
    "has have any anything show tell give".split()
)
# Prefixes that make one word with what follows ("re-start", "un-mute", "re-run"); other hyphenated words are read
# as their parts ("force-restart", "first-token", "all-reduce"), names and flags aside.
_PREFIXES = frozenset({"re", "un", "pre", "de", "non", "co", "mis"})
# Chat shorthand read as the word it stands for, so every later step knows only one spelling ("what can u do",
# "r we live", "launch cmd", "restart kimi l8r", "b4 standup"). "2day" is not here: it is a length (two days).
_SHORTHAND = {"u": "you", "r": "are", "ur": "your", "cmd": "command", "cmds": "commands", "l8r": "later",
              "l8er": "later", "b4": "before", "2nite": "tonight", "2night": "tonight", "yday": "yesterday",
              "yest": "yesterday", "cuz": "because", "coz": "because", "bc": "because", "plz": "please",
              "thru": "through", "msg": "message", "msgs": "messages", "lat": "latency", "tput": "throughput",
              "err": "error", "errs": "errors", "tmw": "tomorrow"}
_CONTRACTIONS = re.compile(r"^(?:\w+n't|i'm|i've|i'd|i'll|we're|you're|they're|let's|it'll|that'll)$")


@dataclass(frozen=True, slots=True)
class Token:
    """One word of a message."""

    norm: str  # lower-case, NFKC ("Kimi's" → "kimi")
    raw: str  # as written, case kept ("NCCL_PROTO")
    stem: str  # the English stem ("settings" → "set", "restarted" → "restart")
    index: int  # position among the message's tokens
    clause: int  # which clause it is in
    part: int  # which comma-separated part of the message it is in ("kimi is wedged, restart it")
    marked: bool  # quoted, in code or struck through
    quoted: bool
    struck: bool
    code: bool
    possessive: bool = False  # written with 's ("kimi's")
    cjk: bool = False  # a run of Chinese or Japanese characters (read by the lexicons, not word by word)
    translated: bool = False  # an English word the lexicons put for a word of another language
    pasted: bool = False  # in a pasted log line or table row


@dataclass(frozen=True, slots=True)
class Clause:
    """A sentence or a question within a message."""

    index: int
    start: int  # first token index
    end: int  # one past the last token index
    question: bool  # ends with a question mark
    marked: bool  # every word of it is quoted, code or struck


@dataclass(frozen=True, slots=True)
class Words:
    """The message's tokens, clauses and emoji."""

    tokens: tuple[Token, ...]
    clauses: tuple[Clause, ...]
    emoji: tuple[str, ...]
    text: str  # the whole plain text, lower-case (for the few checks that look at punctuation)
    assignments: tuple[tuple[int, str], ...]  # "NAME=VALUE": (index of NAME's token, VALUE as written)
    labels: frozenset[int] = frozenset()  # parts that end with a colon ("bob: restart kimi", "todo: …")

    def clause_tokens(self, clause: int) -> tuple[Token, ...]:
        """The tokens of one clause."""
        c = self.clauses[clause]
        return self.tokens[c.start:c.end]

    @property
    def live(self) -> tuple[Token, ...]:
        """The tokens that were said, not quoted, in code or struck."""
        return tuple(t for t in self.tokens if not t.marked)


@functools.cache
def _english() -> Callable[[str], str]:
    import Stemmer  # PyStemmer: Snowball's C stemmers (the pure-Python ones cost ~0.1 ms a word)

    stemmer = Stemmer.Stemmer("english")
    return functools.lru_cache(maxsize=4096)(stemmer.stemWord)


def stem(word: str) -> str:
    """The English stem of a lower-case word (Snowball's Porter2); names and numbers stay as they are."""
    if not word.isalpha() or len(word) < 3:
        return word
    return _english()(word)


def normalise(text: str) -> str:
    """One form for every way of typing the same word: NFKC (full-width), lower case, straight quotes."""
    return unicodedata.normalize("NFKC", text).replace("\u2019", "'").lower()


def words(message: Message) -> Words:
    """Tokenise ``message`` once: words with their stems, marks and clauses."""
    tokens: list[Token] = []
    clauses: list[Clause] = []
    assignments: list[tuple[int, str]] = []
    labels: set[int] = set()
    clause_start = 0
    question = False
    pending_eq = False
    part = 0
    plain: list[str] = []

    def close(q: bool) -> None:
        nonlocal clause_start
        if len(tokens) > clause_start:
            marked = all(t.marked for t in tokens[clause_start:])
            clauses.append(Clause(len(clauses), clause_start, len(tokens), q, marked))
            clause_start = len(tokens)

    for seg in message.segments:
        text = unicodedata.normalize("NFKC", seg.text)
        plain.append(text)
        for m in _TOKEN.finditer(text):
            if m.group("punct") or m.group("enum"):
                p = m.group("punct") or "\n"
                if p == ":" and tokens and tokens[-1].part == part:
                    labels.add(part)
                part += 1
                if p == "=":
                    pending_eq = bool(tokens)
                    continue
                if p in _QUESTION:
                    question = True
                    if len(tokens) == clause_start and clauses and clauses[-1].end == clause_start:
                        # "restart kimi...?": the question mark after the dots asks the sentence before it.
                        clauses[-1] = replace(clauses[-1], question=True)
                if p in _ENDS and not seg.code:
                    close(question)
                    question = False
                continue
            raw = m.group("word") or m.group("cjk")
            cjk = m.group("cjk") is not None
            if pending_eq and not cjk:
                assignments.append((len(tokens) - 1, raw))
                pending_eq = False
            pending_eq = False
            norm, raw, possessive = _word(raw)
            if norm in _CLAUSE_OPENERS and len(tokens) > clause_start:
                close(question)
                question = False
                part += 1
            tokens.append(Token(
                norm=norm, raw=raw, stem=norm if cjk else stem(norm), index=len(tokens), clause=len(clauses),
                part=part, marked=seg.marked, quoted=seg.quoted, struck=seg.struck, code=seg.code,
                possessive=possessive, cjk=cjk, pasted=seg.pasted))
    close(question)
    # A question mark ends its clause; a message of one clause written as a question is one.
    joined = _joined_questions(tokens, clauses)
    return Words(tokens=tuple(tokens), clauses=joined, emoji=message.emoji, text=normalise(" ".join(plain)),
                 assignments=tuple(assignments), labels=frozenset(labels))


def _word(raw: str) -> tuple[str, str, bool]:
    """A word's normal form, as written without its 's, and whether it had one ("Kimi's" → "kimi")."""
    norm = normalise(raw)
    if norm.endswith("'s") and len(norm) > 2:
        return norm[:-2], raw[:-2], True
    if "'" in norm and not _CONTRACTIONS.match(norm):
        norm = norm.strip("'")
    return _SHORTHAND.get(norm, norm), raw, False


def _joined_questions(tokens: list[Token], clauses: list[Clause]) -> tuple[Clause, ...]:
    """Two questions joined in one sentence ("is kimi up and what's its tp") are two clauses."""
    out: list[Clause] = []
    for c in clauses:
        start = c.start
        for i in range(c.start + 2, c.end - 1):
            if tokens[i].norm in _JOINS and tokens[i + 1].norm in _ASKS and not any(
                    t.norm in ("between", "both") for t in tokens[start:i]):  # "drift between X and what's Y"
                out.append(replace(c, index=len(out), start=start, end=i))
                start = i
        out.append(replace(c, index=len(out), start=start))
    if len(out) == len(clauses):
        return tuple(clauses)
    for c in out:
        for t in tokens[c.start:c.end]:
            tokens[t.index] = replace(t, clause=c.index)
    return tuple(out)


def compound_parts(word: str) -> list[str]:
    """The words a compound is read as: "ttft/itl", "p50/p99", "force-restart", "first-token" are two;
    "re-start" and "un-mute" are one ("restart", "unmute"). A path, a flag, "tok/s" and anything with a
    digit or a one-letter part ("gpu-c", "kimi-k2.5") stay as written."""
    if "/" in word:
        parts = word.split("/")
        if (word.startswith("/") or word in ("tok/s", "tokens/s", "t/s") or len(parts) != 2
                or not all(len(p) >= 2 and p[:1].isalpha() for p in parts)):
            return [word]
        return parts
    if "-" in word and not word.startswith("-"):
        parts = word.split("-")
        if not all(p.isalpha() and len(p) >= 2 for p in parts):
            return [word]
        return ["".join(parts)] if parts[0] in _PREFIXES and len(parts) == 2 else parts
    return [word]


def split_compounds(w: Words, is_name: Callable[[str], bool]) -> Words:
    """Compounds read as their words (``compound_parts``); names stay whole ("Qwen/Qwen3-32B")."""
    if not any("/" in t.norm or "-" in t.norm for t in w.tokens):
        return w
    out: list[Token] = []
    moved: dict[int, int] = {}
    for t in w.tokens:
        moved[t.index] = len(out)
        parts = [t.norm] if is_name(t.norm) else compound_parts(t.norm)
        if len(parts) == 1 and parts[0] == t.norm:
            out.append(replace(t, index=len(out)))
            continue
        raws = t.raw.replace("/", "-").split("-") if len(parts) > 1 else [t.raw.replace("-", "")]
        for p, raw in zip(parts, raws if len(raws) == len(parts) else parts, strict=True):
            out.append(replace(t, norm=p, raw=raw, stem=stem(p), index=len(out)))
    clauses = tuple(replace(c, start=moved.get(c.start, len(out)),
                            end=moved[c.end] if c.end in moved else len(out)) for c in w.clauses)
    return replace(w, tokens=tuple(out), clauses=clauses,
                   assignments=tuple((moved[i], v) for i, v in w.assignments if i in moved))
