"""Intents are scored, not first-matched: each command's words (``Command.words``) are looked for anywhere
in a clause, by their stems, with typo tolerance for words of four letters or more.

Phrases are read as a whole, longest first: a word inside a matched phrase counts for that phrase only
("restart history" is not "restart", "bench results" not "bench"). A word several commands share counts
for each of them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from bot.understanding.text import Token, compound_parts, stem
from bot.understanding.wordlists import common_english
from handlers.commands import COMMANDS, Command

WEIGHTS = {"strong": 3.0, "medium": 1.5, "weak": 0.5}


@dataclass(frozen=True)
class Hit:
    """One phrase found: where, and what it gave to which commands."""

    start: int  # index of its first token
    tokens: tuple[int, ...]
    words: tuple[str, ...]
    credits: tuple[tuple[str, float], ...]  # (command name, weight)
    typo: bool = False


@dataclass
class Scores:
    """Each command's score in a span of tokens, and the phrases that made it."""

    by_command: dict[str, float] = field(default_factory=dict)
    hits: list[Hit] = field(default_factory=list)

    def best(self) -> list[tuple[str, float]]:
        """Commands by score, best first (only those that scored)."""
        # A tie goes to the command named first ("logs from the last restart").
        return sorted(((c, s) for c, s in self.by_command.items() if s > 0), key=lambda p: (-p[1], self.first_at(p[0])))

    def words_of(self, command: str) -> list[Hit]:
        """The phrases that scored for ``command``."""
        return [h for h in self.hits if any(c == command for c, _ in h.credits)]

    def first_at(self, command: str) -> int:
        """Where the first phrase of ``command`` is (for "answer the first question")."""
        return min((h.start for h in self.words_of(command)), default=1 << 30)


class _Phrase(NamedTuple):  # a NamedTuple: a cold start builds ~700 of them
    stems: tuple[str, ...]
    words: tuple[str, ...]
    credits: tuple[tuple[str, float], ...]
    spellings: frozenset[str]  # every word as the table writes it


@functools.cache
def _phrases(commands: tuple[Command, ...] = COMMANDS) -> tuple[_Phrase, ...]:
    """Every phrase of every command, grouped by its stems ("restart", "restarts" and "restarted" are one,
    crediting every command that has one of them), longest first."""
    grouped: dict[tuple[str, ...], dict[str, float]] = {}
    spelled: dict[tuple[str, ...], set[str]] = {}
    for c in commands:
        for level in ("strong", "medium", "weak"):
            for term in getattr(c.words, level):
                # Words as the tokeniser reads them: compounds apart, "what's" as "what".
                words = tuple(p.removesuffix("'s") for w in term.lower().split() for p in compound_parts(w))
                # "=doing": this spelling only (its stem "do" is every "do").
                stems = tuple(w if w.startswith("=") else stem(w) for w in words)
                words = tuple(w.lstrip("=") for w in words)
                credits = grouped.setdefault(stems, {})
                credits[c.name] = max(credits.get(c.name, 0.0), WEIGHTS[level])
                spelled.setdefault(stems, set()).add(" ".join(words))
    out = [_Phrase(stems, tuple(sorted(spelled[stems], key=len)[0].split()), tuple(credits.items()),
                   frozenset(w for sp in spelled[stems] for w in sp.split()))
           for stems, credits in grouped.items()]
    return tuple(sorted(out, key=lambda p: -len(p.stems)))


@functools.cache
def strong_words() -> frozenset[str]:
    """The single words that name a command on their own ("status", "logs", "thruput")."""
    return frozenset(w for p in _phrases() if len(p.stems) == 1 and max(c for _, c in p.credits) >= 3.0
                     for w in (*p.spellings, *p.stems))


@functools.cache
def vocabulary() -> frozenset[str]:
    """Every word of every command, as written and as stems: these are never names and never typos."""
    out: set[str] = set()
    for p in _phrases():
        out.update(p.spellings)
        out.update(p.stems)
    return frozenset(out)


def _same(t: Token, word: str, stem_: str) -> bool:
    return t.norm == word or (t.stem == stem_ and not stem_.startswith("="))


_VOWELS = frozenset("aeiou")


def consonants(word: str) -> str:
    """``word`` as people shorten it by dropping its vowels, first letter kept ("throughput" → "thrghpt")."""
    return word[:1] + "".join(c for c in word[1:] if c not in _VOWELS)


def _dropped_vowels(t: Token, word: str) -> bool:
    """``t`` is ``word`` without its vowels ("stts", "thrpt" of "thruput", "lgs", "sttngs")."""
    return (len(t.norm) >= 3 and len(word) >= 4 and t.norm.isalpha() and not _VOWELS & set(t.norm[1:])
            and consonants(word) == t.norm and consonants(word) != word)


def _doubled(typed: str, word: str) -> bool:
    """``typed`` is ``word`` with one letter typed twice ("envv", "logss"), short words too."""
    return (len(word) >= 3 and len(typed) == len(word) + 1 and typed.isalpha()
            and any(typed[i] == typed[i - 1] and typed[:i] + typed[i + 1:] == word for i in range(1, len(typed))))


def _typo(t: Token, word: str) -> bool:
    """``t`` is a misspelling of ``word``: one edit (two from 8 letters), same first letter, 4+ letters, or
    the word without its vowels."""
    if _dropped_vowels(t, word) or _doubled(t.norm, word):
        return True
    if len(word) < 4 or len(t.norm) < 4 or t.norm[0] != word[0] or not t.norm.isalpha():
        return False
    if abs(len(word) - len(t.norm)) > 2:
        return False
    from rapidfuzz.distance import OSA

    return OSA.distance(t.norm, word, score_cutoff=2) <= (2 if len(word) >= 8 else 1)


@functools.cache
def _by_first() -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Phrases (their place in ``_phrases()``) by their first word as written and by its stem."""
    by_word: dict[str, list[int]] = {}
    by_stem: dict[str, list[int]] = {}
    for k, p in enumerate(_phrases()):
        by_word.setdefault(p.words[0], []).append(k)
        if not p.stems[0].startswith("="):
            by_stem.setdefault(p.stems[0], []).append(k)
    return by_word, by_stem


@functools.cache
def _singles_by_letter() -> dict[str, list[_Phrase]]:
    """One-word phrases by the first letter of their spellings (a typo keeps the first letter)."""
    out: dict[str, list[_Phrase]] = {}
    for p in _phrases():
        if len(p.words) == 1:
            for letter in dict.fromkeys(w[:1] for w in p.spellings):
                out.setdefault(letter, []).append(p)
    return out


def score(tokens: Sequence[Token], taken: Iterable[int] = (), known: frozenset[str] = frozenset()) -> Scores:
    """Score every command on ``tokens``. ``taken`` are tokens already read as something else (a flag's
    words, a name); ``known`` words are never read as a typo of a command word."""
    used = set(taken)
    out = Scores()
    phrases = _phrases()
    by_word, by_stem = _by_first()
    # Longest phrases first, then in the message's order: the phrases that start at one of its words.
    starts = sorted({(k, i) for i, t in enumerate(tokens)
                     for k in (*by_word.get(t.norm, ()), *by_stem.get(t.stem, ()))})
    for k, i in starts:
        p, t = phrases[k], tokens[i]
        n = len(p.words)
        if t.index in used or not _same(t, p.words[0], p.stems[0]):
            continue
        # The rest of the phrase in order, with at most one word between two of its words, and at most one
        # of them misspelt ("gpu staus").
        got = [t.index]
        j = i + 1
        typo = False
        for w, s in zip(p.words[1:], p.stems[1:], strict=True):
            if j < len(tokens) and tokens[j].index not in used and _same(tokens[j], w, s):
                got.append(tokens[j].index)
                j += 1
            elif (not typo and j < len(tokens) and tokens[j].index not in used and tokens[j].norm not in known
                  and tokens[j].norm not in vocabulary() and _typo(tokens[j], w)
                  and tokens[j].norm not in common_english()):
                got.append(tokens[j].index)
                j += 1
                typo = True
            elif (j + 1 < len(tokens) and tokens[j + 1].index not in used and _same(tokens[j + 1], w, s)
                  and n > 1):
                got.append(tokens[j + 1].index)
                j += 2
            else:
                break
        if len(got) == n:
            used.update(got)
            out.hits.append(Hit(t.index, tuple(got), p.words, p.credits))
    # Typos of single command words, for words nothing else read.
    for t in tokens:
        if t.index in used or t.norm in known or t.norm in vocabulary() or t.cjk:
            continue
        for p in _singles_by_letter().get(t.norm[:1], ()):
            # A word of its own is no misspelling ("mate" is not "mute"); the list loads only for a near miss.
            if any(_typo(t, w) for w in p.spellings) and t.norm not in common_english():
                used.add(t.index)
                out.hits.append(Hit(t.index, (t.index,), p.words, p.credits, typo=True))
                break
    for h in out.hits:
        for command, weight in h.credits:
            out.by_command[command] = out.by_command.get(command, 0.0) + weight
    return out
