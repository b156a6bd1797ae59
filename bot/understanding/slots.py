"""Where a name stands: which words of a message name a service or a node, and which words stand where a
name stands but name nothing (those are answered "I don't know X").

A word is taken for a name only where a name can stand (after a command word, "status of X", "X's", "is X
up") or when it is an open model's family name; any other word is just a word ("is prod ok?").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.understanding import arguments, lexicon, scoring, settings_words
from bot.understanding.names import NameIndex, Target
from bot.understanding.text import Token, Words
from bot.understanding.weighing import CHART_CUES, STATES, chart_cue
from bot.understanding.wordlists import english, inflected_english, model_families

# Where a name stands: after a command word (with or without a preposition: "status llama", "logs for
# gpu-c"), before one ("llama status"), with 's, between "is" and a state ("is llama up"); after any
# preposition only when it is written like a name ("on gpu-c").
_COMMAND_WORDS = frozenset({"restart", "bounce", "reboot", "status", "logs", "log", "settings", "config", "gpus",
                            "throughput", "compare", "silence", "mute", "unsilence", "unmute", "unlock", "bench",
                            "history", "audit", "diff", "tail", "journal", "flags", "env", "vs", "versus",
                            "and"})
_PREPOSITIONS = frozenset({"on", "for", "of", "in", "at", "from", "about", "with", "to", "vs", "versus", "and",
                           "than"})
# "is llama up", "how's node-7 doing": a state (or how it is doing) after what it is said of.
_STATES = STATES | {"running", "loading", "done", "still"}
_DOING = frozenset({"doing", "looking", "going", "holding"})
# The cluster as a whole: never a name, and never "unknown" ("is prod ok?").
_EVERYTHING = frozenset({"prod", "production", "staging", "infra", "cluster", "fleet", "everything", "all",
                         "both", "everyone", "anything", "anywhere"})


@dataclass
class Found:
    """Names found in the message: each target and the token that named it."""

    targets: list[Target] = field(default_factory=list)
    where: list[int] = field(default_factory=list)
    tokens: set[int] = field(default_factory=set)
    unknown: list[Token] = field(default_factory=list)

    def in_clause(self, clause: int, toks: Sequence[Token]) -> list[Target]:
        idx = {t.index for t in toks if t.clause == clause}
        return [t for t, i in zip(self.targets, self.where, strict=True) if i in idx]


def is_word(word: str) -> bool:
    if word == "/inferbot":
        return True  # the slash command typed into a message
    return (word in english() or word in scoring.vocabulary() or word in lexicon.stopwords()
            or word in _EVERYTHING or word in CHART_CUES)


def looks_like_value(t: Token) -> bool:
    w = t.norm
    return (w.replace(".", "").replace("%", "").isdigit() or arguments.window([t]) is not None
            or len(w) <= 1 or w.startswith("-") or w in ("tok/s", "tokens/s") or w[:1].isdigit()
            or any(ch in w for ch in "_()[]{}=<>\"\\'") or ("/" in w and not w.startswith("/")))


def _name_shaped(word: str) -> bool:
    """Written like a host or a model: a hyphen with a short part or a digit ("gpu-c", "node-7", "qwen2")."""
    parts = word.split("-")
    return (len(parts) > 1 and any(len(p) <= 2 or any(ch.isdigit() for ch in p) for p in parts)) or (
        any(ch.isdigit() for ch in word) and any(ch.isalpha() for ch in word))


def find(words_: Words, index: NameIndex, taken: set[int]) -> Found:
    """Every word that names a target; and the words that stand where a name stands but name nothing."""
    found = Found()
    toks = words_.tokens
    anchor = _COMMAND_WORDS | scoring.strong_words()
    values = {i + 1 for i, _ in words_.assignments}  # NCCL_PROTO=LL: "LL" is a value
    for i, t in enumerate(toks):
        if t.index in taken or t.cjk or t.translated or t.index in values:
            continue
        target = index.exact(t.norm) or index.variant(t.norm)
        if target is None and not is_word(t.norm) and not looks_like_value(t):
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
        if t.marked or is_word(t.norm) or looks_like_value(t) or not any(ch.isalpha() for ch in t.norm):
            continue
        prev = toks[i - 1].norm if i > 0 and toks[i - 1].part == t.part else None
        nxt = toks[i + 1].norm if i + 1 < len(toks) and toks[i + 1].part == t.part else None
        before2 = toks[i - 2] if i > 1 else None
        after_command = prev in _COMMAND_WORDS or (
            prev in _PREPOSITIONS and before2 is not None and (before2.norm in anchor or before2.index in taken))
        slot = (after_command or t.possessive or nxt in _COMMAND_WORDS
                or (prev in _PREPOSITIONS and _name_shaped(t.norm))
                or (prev in ("is", "are", "was") and nxt in _STATES)
                or (prev == "how" and (nxt in _DOING or _name_shaped(t.norm))))
        if t.norm in model_families() or (slot and (_name_shaped(t.norm) or not inflected_english(t.norm))
                                          and t.norm not in settings_words.setting_words()
                                          and not chart_cue(t)):
            found.unknown.append(t)
    return found


def known(index: NameIndex) -> frozenset[str]:
    return frozenset([*index.services, *index.nodes, *index.aliases, *index.variants])
