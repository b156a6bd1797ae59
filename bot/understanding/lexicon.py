"""Other languages, read through small lexicons kept as data (``data/lexicon.toml``): their words become the
English words the command table knows, before anything else reads the message.

German, Spanish and French words are looked up by their Snowball stem in that language; Chinese and
Japanese runs of characters are searched for the lexicon's strings, longest first.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import replace

from bot.understanding.text import Token, Words, stem
from bot.understanding.wordlists import lexicon_data

_STEMMED = ("de", "es", "fr")
_SCRIPTS = ("zh", "ja")
_LANG = {"de": "german", "es": "spanish", "fr": "french"}
_POSTPOSITIONS = frozenset({"after", "before", "if", "when", "until"})
_ELISION = ("l'", "d'", "qu'", "j'", "n'", "c'", "s'", "m'", "t'")


@functools.cache
def _raw() -> dict[str, dict[str, str]]:
    return lexicon_data()


def _data() -> dict[str, dict[str, str]]:
    return {k: v for k, v in _raw().items() if k != "stop"}


@functools.cache
def stopwords() -> frozenset[str]:
    """Little words of the other languages: never names."""
    return frozenset(str(_raw()["stop"]["words"]).split())


@functools.cache
def _stemmer(lang: str) -> Callable[[str], str]:
    import Stemmer  # PyStemmer: Snowball's C stemmers

    return functools.lru_cache(maxsize=4096)(Stemmer.Stemmer(_LANG[lang]).stemWord)


@functools.cache
def _stemmed() -> dict[str, dict[str, str]]:
    """Per language: the stem of each lexicon word → its English words."""
    data = _data()
    out: dict[str, dict[str, str]] = {}
    for lang in _STEMMED:
        table: dict[str, str] = {}
        for word, english in data[lang].items():
            if " " in word:
                continue
            table[word] = english
            table.setdefault(_stemmer(lang)(word), english)
        out[lang] = table
    return out


@functools.cache
def _phrases() -> list[tuple[tuple[str, ...], str, bool]]:
    """Keys of several words (any language), longest first, and whether the key may be split: a German, Spanish
    or French one always (a separable verb), an English idiom only where it has a gap ("give … a kick")."""
    data = _data()
    pairs = [(tuple(w.split()), e, True) for lang in _STEMMED for w, e in data[lang].items() if " " in w]
    pairs += [(tuple(w.replace("…", " ").split()), e, "…" in w) for w, e in data["en"].items()]
    return sorted(pairs, key=lambda p: -len(p[0]))


def _phrase_at(toks: Sequence[Token], i: int) -> tuple[str, list[int]] | None:
    """A phrase key starting at ``toks[i]``: in a row, or its first word here and the rest later in the same
    sentence (a separable verb). Returns the English words and the positions it took."""
    for key, english, separable in _phrases():
        if toks[i].norm != key[0]:
            continue
        if tuple(t.norm for t in toks[i:i + len(key)]) == key:
            return english, list(range(i, i + len(key)))
        if not separable:
            continue
        rest = [j for j in range(i + 1, len(toks)) if toks[j].clause == toks[i].clause]
        got = [i]
        for word in key[1:]:
            j = next((j for j in rest if toks[j].norm == word and j not in got), None)
            if j is None:
                break
            got.append(j)
        if len(got) == len(key):
            return english, got
    return None


@functools.cache
def _scripts() -> list[tuple[str, str]]:
    """Chinese and Japanese strings → English words, longest first."""
    data = _data()
    pairs = {word: english for lang in _SCRIPTS for word, english in data[lang].items()}
    return sorted(pairs.items(), key=lambda p: len(p[0]), reverse=True)


def _latin(word: str) -> str | None:
    """The English words of a German, Spanish or French word, or None."""
    for prefix in _ELISION:
        if word.startswith(prefix) and len(word) > len(prefix) + 1:
            word = word[len(prefix):]
            break
    tables = _stemmed()
    bare = "".join(c for c in unicodedata.normalize("NFD", word) if not unicodedata.combining(c))
    for candidate in (word, bare):  # a tense whose accent the stemmer keeps ("reinició"): the word unaccented
        for lang in _STEMMED:
            hit = tables[lang].get(candidate)
            if hit is None:
                hit = tables[lang].get(_stemmer(lang)(candidate))
            if hit is not None:
                return _past(hit) if _PAST_LATIN.search(word) else hit
    return None


# A past tense or participle ("reinició", "reinicié", "ha reiniciado", "a redémarré", "neugestartet"): what
# someone did, never the imperative the stem shares.
_PAST_LATIN = re.compile(r"(?:[óé]|ée|és|ées|ad[oa]s?|id[oa]s?|^ge\w+et)$")
_PAST = {"restart": "restarted", "bounce": "bounced", "reboot": "rebooted", "kick": "kicked", "start": "started"}


def _past(english: str) -> str:
    return _PAST.get(english, english)


def _cjk(run: str) -> list[str]:
    """The English words found in a run of Chinese or Japanese characters, in order."""
    found: list[tuple[int, str]] = []
    taken = [False] * len(run)
    for word, english in _scripts():
        start = run.find(word)
        while start != -1:
            if not any(taken[start:start + len(word)]):
                found.append((start, english))
                for i in range(start, start + len(word)):
                    taken[i] = True
            start = run.find(word, start + 1)
    words = [e for _, e in sorted(found)]
    # Chinese and Japanese put "after", "before", "if" behind what they govern (加载完之后, ロードが終わったら):
    # in English they go before it, so a condition reads as one.
    for i in range(1, len(words)):
        if words[i] in _POSTPOSITIONS:
            words[i - 1], words[i] = words[i], words[i - 1]
    return words


def translate(words: Words, known: Callable[[str], bool]) -> Words:
    """``words`` with every foreign word the lexicons know replaced by its English words.

    ``known(word)`` tells an English word (or a name) apart: those are never translated.
    """
    firsts = {key[0] for key, _, _ in _phrases()}
    if all(t.norm.isascii() and t.norm not in firsts and (known(t.norm) or not _latin(t.norm))
           for t in words.tokens):
        return words
    out: list[Token] = []
    moved: dict[int, int] = {}
    asks: set[int] = set()  # clauses a question particle (吗) makes questions
    toks = words.tokens
    phrase_of: dict[int, str] = {}  # token position → the English words of the phrase starting there
    dropped: set[int] = set()  # the other words of those phrases
    for i, t in enumerate(toks):
        if i in dropped or t.norm not in firsts:
            continue
        hit = _phrase_at(toks, i)
        if hit is not None:
            phrase_of[i] = hit[0]
            dropped.update(hit[1][1:])
    for i, t in enumerate(toks):
        moved[t.index] = len(out)
        if i in dropped:
            continue
        if i in phrase_of:
            english: str | None = phrase_of[i]
        elif t.cjk:
            english = " ".join(_cjk(t.norm))
        elif known(t.norm):
            english = None
        else:
            english = _latin(t.norm)
        if not english:
            if not t.cjk:
                out.append(replace(t, index=len(out)))
            continue
        for w in english.split():
            if w == "?":
                asks.add(t.clause)
                continue
            out.append(replace(t, norm=w, raw=w, stem=stem(w), index=len(out), cjk=False, translated=True))
    clauses = []
    for c in words.clauses:
        start = moved.get(c.start, len(out))
        end = moved.get(c.end, len(out)) if c.end < len(words.tokens) else len(out)
        clauses.append(replace(c, start=start, end=end, question=c.question or c.index in asks))
    assignments = tuple((moved[i], v) for i, v in words.assignments if i in moved)
    return replace(words, tokens=tuple(out), clauses=tuple(clauses), assignments=assignments)
