"""vLLM flags and environment variables by any of their names: ``--max-model-len``, ``-tp``, ``tp8``,
``max_num_seqs``, "context length", "what precision is the kv cache in", ``NCCL_PROTO``, "nccl proto", "hf token",
and by a value only one of them takes ("qwen on bf16?").

The canonical flag names and short aliases are vLLM's own (``services.parse.vllm_args``); the everyday
words are data (``data/flags.toml``: the words of each flag's help text and team shorthand, and the values
each setting takes).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from bot.understanding import values
from bot.understanding.text import Token, Words, stem
from bot.understanding.wordlists import flags_data
from services.parse.vllm_args import FLAG_GROUPS, KNOWN_SWITCHES, MULTI_VALUE_FLAGS, SHORT_ALIASES

Kind = Literal["flag", "env"]
Hit = tuple[Kind, str]
# Environment variables a vLLM unit sets are written with underscores; these prefixes make a lower-case
# word one too ("hf_token"), where "max_num_seqs" stays a flag.
ENV_PREFIXES = ("nccl_", "cuda_", "vllm_", "hf_", "torch_", "pytorch_", "omp_", "nvidia_", "ucx_", "gloo_",
                "transformers_", "tokenizers_", "huggingface_", "ld_", "mkl_", "nvte_", "triton_")
_ENV_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+$")
# A short alias with its value written on ("tp8", "pp2", "dp4").
_ALIAS_VALUE = re.compile(r"^(tp|pp|dp|dcp|pcp)(\d{1,3})$")
# An environment variable's words that say nothing about which one it is ("VLLM_…", "…_S").
_ENV_LEAD = frozenset({"vllm", "torch", "pytorch"})
_ENV_TAIL = frozenset({"s", "seconds", "mb", "ms"})
# Words that ask for a variable rather than a flag ("is the api key variable set").
_ENV_WORDS = frozenset({"variable", "variables", "var", "vars", "env", "environment", "envvar", "envvars"})
# The journal's own options, typed after "logs" ("logs kimi --since 1h").
_LOG_OPTIONS = frozenset({"since", "until", "lines", "follow", "grep", "reverse", "no-pager", "boot", "priority"})
# Pieces of a " + " phrase lie this close (in words).
_NEAR = 8


@dataclass(frozen=True)
class Setting:
    """One flag or environment variable a message asks about."""

    kind: Kind
    name: str  # canonical flag (no dashes in front) or the variable's name
    tokens: frozenset[int]  # the message's tokens that named it (they are no other word)
    value: str | None = None  # "are we still on NCCL_PROTO=LL?" → "LL"
    measured: bool = False  # named by words that also name a live measurement ("memory utilization")


@functools.cache
def flag_names() -> frozenset[str]:
    """vLLM's canonical long flag names that this bot knows."""
    names = {p for _, pats in FLAG_GROUPS for p in pats if "*" not in p}
    return frozenset(names | KNOWN_SWITCHES | MULTI_VALUE_FLAGS | set(SHORT_ALIASES.values()))


# Words written joined or apart ("cudagraph", "cuda graph"): read apart, in the table and in messages.
_JOINED = {"cudagraph": "cuda graph", "cudagraphs": "cuda graphs", "allreduce": "all reduce", "kvcache": "kv cache"}


def _split(text: str) -> list[str]:
    return [p for w in text.lower().replace("_", " ").replace("-", " ").split() for p in _JOINED.get(w, w).split()]


def _key(words: Sequence[str]) -> tuple[str, ...]:
    """A phrase's words as matched: one word as written, several by their stems."""
    return tuple(words) if len(words) == 1 else tuple(stem(w) for w in words)


@dataclass(frozen=True)
class _Table:
    exact: dict[tuple[str, ...], Hit]  # a phrase in a row (one word as written, several by their stems)
    written: dict[tuple[str, ...], Hit]  # the same phrases as written (for a misspelt word in one)
    # " + " phrases: their pieces by stems, and every stem they need (most messages have few of them)
    near: tuple[tuple[tuple[tuple[str, ...], ...], Hit, frozenset[str]], ...]
    ignore: tuple[tuple[str, ...], ...]
    measured: frozenset[tuple[str, ...]]
    as_env: dict[tuple[str, ...], Hit]  # a flag's words that are a variable's when asked as one ("api key variable")
    longest: int


def _derived(shadowed: dict[tuple[str, ...], Hit]) -> dict[tuple[str, ...], Hit]:
    """The phrases vLLM's own names give: each flag's words, and without its "enable"/"disable" ("custom all
    reduce"); each known variable's words, and without its prefix or unit ("engine ready timeout"). A
    variable's words that are a flag's too ("api key") go to ``shadowed``."""
    out: dict[tuple[str, ...], Hit] = {}
    # "disable-…" first, so a name both have ("log requests") is the "enable-…" one.
    for name in sorted(flag_names(), key=lambda n: (not n.startswith("disable-"), n)):
        words = name.split("-")
        if len(words) > 1 or name in ("quantization", "dtype", "seed", "tokenizer", "revision", "port", "host"):
            out[_key(words)] = ("flag", name)
        if words[0] in ("enable", "disable") and (len(words) > 2 or len(words[1]) >= 4):
            out[_key(words[1:])] = ("flag", name)
    for name in flags_data()["env"]:
        words = name.lower().split("_")
        out[_key(words)] = ("env", name)
        short = words[1:] if words[0] in _ENV_LEAD | {"nccl", "cuda", "hf"} else words
        short = short[:-1] if short and short[-1] in _ENV_TAIL else short
        if len(short) >= 2:
            if _key(short) in out:
                shadowed.setdefault(_key(short), ("env", name))
            out.setdefault(_key(short), ("env", name))
    return out


@functools.cache
def _table() -> _Table:
    data = flags_data()
    as_env: dict[tuple[str, ...], Hit] = {}
    exact = _derived(as_env)
    written: dict[tuple[str, ...], Hit] = {}
    near: list[tuple[tuple[tuple[str, ...], ...], Hit, frozenset[str]]] = []
    for kind in ("flags", "env"):
        for name, phrases in data[kind].items():
            hit: Hit = ("flag", name) if kind == "flags" else ("env", name)
            for p in phrases:
                if " + " in p:
                    pieces = tuple(tuple(stem(w) for w in _split(piece)) for piece in p.split(" + "))
                    near.append((pieces, hit, frozenset(w for piece in pieces for w in piece)))
                else:
                    exact[_key(_split(p))] = hit
                    written[tuple(_split(p))] = hit
    ignore = tuple(_key(_split(p)) for p in data["ignore"]["phrases"])
    measured = frozenset(_key(_split(p)) for p in data["measured"]["phrases"])
    return _Table(exact, written, tuple(near), ignore, measured, as_env, max(len(k) for k in exact))


@functools.cache
def setting_words() -> frozenset[str]:
    """Every word of a flag's or a variable's names and everyday phrases ("attention", "backend", "swap"):
    where a name could stand they are still the setting's words, never an unknown name."""
    data = flags_data()
    out = {w for kind in ("flags", "env") for phrases in data[kind].values() for p in phrases
           for w in _split(p.replace(" + ", " "))}
    out |= {w for name in flag_names() for w in name.split("-")}
    out |= {w for name in known_env() for w in name.lower().split("_")}
    return frozenset({w for w in out if len(w) >= 3 and w.isalpha()} | set(SHORT_ALIASES))


@functools.cache
def known_env() -> frozenset[str]:
    """The environment variables ``data/flags.toml`` knows by everyday words."""
    return frozenset(flags_data()["env"])


def _canonical_flag(word: str) -> str | None:
    name = word.lstrip("-").replace("_", "-")
    if name in ("help", "h"):
        return None  # "--help" is the bot's help, never vLLM's
    if word.startswith("--"):
        if name in _LOG_OPTIONS:
            return None  # "logs kimi --since 1h": the journal's option, not a vLLM flag
        name = name.removeprefix("no-")
        return name if name in flag_names() or len(name) > 2 else None
    if word.startswith("-") and len(name) >= 2:  # "-n 40" is tail's, not vLLM's --nnodes
        return SHORT_ALIASES.get(name)
    return None


def _env_word(t: Token) -> str | None:
    if not _ENV_WORD.match(t.raw):
        return None
    if t.raw.isupper() or t.norm.startswith(ENV_PREFIXES):
        name = t.raw.upper()
        if name in known_env():
            return name
        # "hf_transfer": the one known variable it is the end of (HF_HUB_ENABLE_HF_TRANSFER).
        ends = [e for e in known_env() if e.endswith("_" + name)]
        return ends[0] if len(ends) == 1 else name
    return None


def find(words: Words) -> Setting | None:
    """The flag or environment variable ``words`` ask about, or None. A name written as one (``NCCL_PROTO``,
    ``--max-model-len``, ``-tp``, ``tp8``) wins; then the phrase that covers the most words; then a value only
    one setting takes. The value it checks, if any, comes with it (``values.of``)."""
    found = _written(words) or _by_phrase(words) or _by_value(words)
    pasted = {t.index for t in words.tokens if t.pasted}
    if found is not None and found.tokens <= pasted and len(pasted) < len(words.tokens):
        return None  # "INFO … Starting vLLM API server …\nso qwen is up?": the paste's words, not the question
    if found is None or found.value is not None:
        return found
    return replace(found, value=values.of(words, found.name, found.tokens))


def _written(words: Words) -> Setting | None:
    """A setting written as its name: ``NCCL_PROTO``, ``--max-model-len``, ``-tp``, ``tp8``, ``max_num_seqs``."""
    for t in words.tokens:
        env = _env_word(t)
        if env is not None:
            return Setting("env", env, frozenset({t.index}))
        flag = _canonical_flag(t.norm) if t.norm.startswith("-") else None
        if flag is not None:
            return Setting("flag", flag, frozenset({t.index}))
        m = _ALIAS_VALUE.match(t.norm)
        if m:
            return Setting("flag", SHORT_ALIASES[m.group(1)], frozenset({t.index}), m.group(2))
        if "_" in t.norm and not t.norm.startswith(ENV_PREFIXES):
            dashed = t.norm.replace("_", "-")
            if dashed in flag_names():
                return Setting("flag", dashed, frozenset({t.index}))
    return None


_Part = tuple[str, str, int, int]  # (word, stem, token index, clause)


def _parts(words: Words) -> list[_Part]:
    """Each token's words ("gpu-memory-utilization" is three), with the token and clause they came from; the
    words of an ignored phrase ("for context") left out."""
    parts = [(w, stem(w), t.index, t.clause) for t in words.tokens if not t.cjk for w in _split(t.norm.lstrip("-"))]
    table = _table()
    drop: set[int] = set()
    for key in table.ignore:
        n = len(key)
        for i in range(len(parts) - n + 1):
            if tuple(p[1] for p in parts[i:i + n]) == key:
                drop.update(range(i, i + n))
    return [p for i, p in enumerate(parts) if i not in drop]


def _exact_at(parts: Sequence[_Part], i: int, n: int) -> Hit | None:
    if parts[i + n - 1][3] != parts[i][3]:
        return None
    key = (parts[i][0],) if n == 1 else tuple(p[1] for p in parts[i:i + n])
    return _table().exact.get(key)


def _find_piece(parts: Sequence[_Part], piece: tuple[str, ...]) -> list[int]:
    """Where a piece of a " + " phrase starts (by stems, in a row, in one clause)."""
    n = len(piece)
    return [i for i in range(len(parts) - n + 1)
            if tuple(p[1] for p in parts[i:i + n]) == piece and parts[i + n - 1][3] == parts[i][3]]


def _near(parts: Sequence[_Part]) -> list[tuple[int, int, Hit, frozenset[int]]]:
    """Every " + " phrase whose pieces lie close together in one clause: (words covered, where, hit, tokens)."""
    stems = {p[1] for p in parts}
    out = []
    for pieces, hit, needs in _table().near:
        if not needs <= stems:
            continue
        where = [_find_piece(parts, piece) for piece in pieces]
        for first in where[0]:
            chosen = [first]
            for starts in where[1:]:
                same = [s for s in starts if parts[s][3] == parts[first][3]]
                if not same:
                    break
                chosen.append(min(same, key=lambda s: abs(s - first)))
            ends = [c + len(p) for c, p in zip(chosen, pieces, strict=False)]
            if len(chosen) == len(pieces) and max(ends) - min(chosen) <= _NEAR:
                idx = frozenset(parts[c + k][2] for c, p in zip(chosen, pieces, strict=True) for k in range(len(p)))
                out.append((sum(len(p) for p in pieces), min(chosen), hit, idx))
                break
    return out


def _by_phrase(words: Words) -> Setting | None:
    """The phrase that covers the most words (a phrase in a row before a " + " phrase, then the first)."""
    parts = _parts(words)
    table = _table()
    found: list[tuple[int, int, int, Hit, frozenset[int]]] = []  # (-words, kind of match, where, hit, tokens)
    for i in range(len(parts)):
        for n in range(min(table.longest, len(parts) - i), 0, -1):
            hit = _exact_at(parts, i, n)
            if hit is not None:
                found.append((-n, 0, i, hit, frozenset(p[2] for p in parts[i:i + n])))
                break
    found += [(-n, 1, i, hit, idx) for n, i, hit, idx in _near(parts)]
    if not found:
        typo = _misspelt(parts)
        if typo is None:
            return None
        found.append(typo)
    n, how, i, (kind, name), idx = min(found, key=lambda f: f[:3])
    key = (parts[i][0],) if n == -1 else tuple(p[1] for p in parts[i:i - n])
    if key in table.as_env and any(p[0] in _ENV_WORDS for p in parts):
        kind, name = table.as_env[key]
    return Setting(kind, name, idx, measured=how == 0 and key in table.measured)


@functools.cache
def _written_index() -> tuple[list[int], dict[tuple[int, int, str], list[tuple[tuple[str, ...], Hit]]]]:
    """Phrases of several words by (length, place, word) for their first two words: with one word misspelt,
    one of those two is as written. And the lengths, longest first."""
    index: dict[tuple[int, int, str], list[tuple[tuple[str, ...], Hit]]] = {}
    for k, v in _table().written.items():
        if len(k) > 1:
            for place in (0, 1):
                index.setdefault((len(k), place, k[place]), []).append((k, v))
    return sorted({n for n, _, _ in index}, reverse=True), index


def _near_miss(a: str, b: str) -> bool:
    """``a`` is ``b`` with one edit, ``b`` a word of five letters or more."""
    if len(b) < 5 or a[:1] != b[:1] or abs(len(a) - len(b)) > 1:
        return False
    from rapidfuzz.distance import OSA  # only a word this close pays for the import

    return OSA.distance(a, b, score_cutoff=1) <= 1


def _misspelt(parts: Sequence[_Part]) -> tuple[int, int, int, Hit, frozenset[int]] | None:
    """A phrase of several words with one of its longer words misspelt ("tensor paralel size")."""
    lengths, index = _written_index()
    for i in range(len(parts)):
        for n in lengths:
            key = tuple(p[0] for p in parts[i:i + n])
            if len(key) < n:
                continue
            for written, hit in (*index.get((n, 0, key[0]), ()), *index.get((n, 1, key[1]), ())):
                wrong = [(a, b) for a, b in zip(key, written, strict=True) if a != b]
                if len(wrong) == 1 and _near_miss(*wrong[0]):
                    return (-n, 2, i, hit, frozenset(p[2] for p in parts[i:i + n]))
    return None


def _by_value(words: Words) -> Setting | None:
    """A value only one setting takes ("qwen on bf16?", "does kimi do 128k")."""
    found = values.naming(words)
    if found is None:
        return None
    kind, name, index, value = found
    return Setting("env" if kind == "env" else "flag", name, frozenset({index}), value)
