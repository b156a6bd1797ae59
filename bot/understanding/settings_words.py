"""vLLM flags and environment variables by any of their names: ``--max-model-len``, ``-tp``,
``max_num_seqs``, "context length", ``NCCL_PROTO``, "nccl proto", "hf token".

The canonical flag names and short aliases are vLLM's own (``services.parse.vllm_args``); the everyday
words are data (``data/flags.toml``: the words of each flag's help text and team shorthand).
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from typing import Literal

from bot.understanding.text import Token, Words
from services.parse.vllm_args import FLAG_GROUPS, KNOWN_SWITCHES, MULTI_VALUE_FLAGS, SHORT_ALIASES

# Environment variables a vLLM unit sets are written with underscores; these prefixes make a lower-case
# word one too ("hf_token"), where "max_num_seqs" stays a flag.
ENV_PREFIXES = ("nccl_", "cuda_", "vllm_", "hf_", "torch_", "pytorch_", "omp_", "nvidia_", "ucx_", "gloo_",
                "transformers_", "tokenizers_", "huggingface_", "ld_", "mkl_", "nvte_", "triton_")
_ENV_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+$")
# Words after "still" that are not the value asked about ("are we still on …").
_NOT_A_VALUE = frozenset("on at using set to the a an with running for in is was".split())


@dataclass(frozen=True)
class Setting:
    """One flag or environment variable a message asks about."""

    kind: Literal["flag", "env"]
    name: str  # canonical flag (no dashes in front) or the variable's name
    tokens: frozenset[int]  # the message's tokens that named it (they are no other word)
    value: str | None = None  # "are we still on NCCL_PROTO=LL?" → "LL"


@functools.cache
def flag_names() -> frozenset[str]:
    """vLLM's canonical long flag names that this bot knows."""
    names = {p for _, pats in FLAG_GROUPS for p in pats if "*" not in p}
    return frozenset(names | KNOWN_SWITCHES | MULTI_VALUE_FLAGS | set(SHORT_ALIASES.values()))


@functools.cache
def _phrases() -> dict[tuple[str, ...], tuple[Literal["flag", "env"], str]]:
    """Every phrase (as words) → (kind, canonical name). Longer phrases are tried first."""
    data = tomllib.loads(resources.files("bot.understanding").joinpath("data/flags.toml").read_text("utf-8"))
    out: dict[tuple[str, ...], tuple[Literal["flag", "env"], str]] = {}
    for name in flag_names():
        words = tuple(name.split("-"))
        if len(words) > 1 or name in ("quantization", "dtype", "seed", "tokenizer", "revision", "port", "host"):
            out[words] = ("flag", name)
    for name, phrases in data["flags"].items():
        for p in phrases:
            out[tuple(_split(p))] = ("flag", name)
    for name, phrases in data["env"].items():
        out[tuple(name.lower().split("_"))] = ("env", name)
        for p in phrases:
            out[tuple(_split(p))] = ("env", name)
    return out


@functools.cache
def known_env() -> frozenset[str]:
    """The environment variables ``data/flags.toml`` knows by everyday words."""
    return frozenset(name for (kind, name) in _phrases().values() if kind == "env")


def _split(text: str) -> list[str]:
    return [w for w in re.split(r"[\s_-]+", text.lower()) if w]


def _canonical_flag(word: str) -> str | None:
    name = word.lstrip("-").replace("_", "-")
    if word.startswith("--"):
        name = name.removeprefix("no-")
        return name if name in flag_names() or len(name) > 2 else None
    if word.startswith("-") and len(name) >= 2:  # "-n 40" is tail's, not vLLM's --nnodes
        return SHORT_ALIASES.get(name)
    return None


def _value_after_still(words: Words, after: int) -> str | None:
    toks = words.tokens
    for i, t in enumerate(toks):
        if t.norm != "still" or i < 0:
            continue
        for u in toks[i + 1:i + 4]:
            if u.norm in _NOT_A_VALUE:
                continue
            if u.index != after and (u.raw.isupper() or u.raw[:1].isupper() or any(ch.isdigit() for ch in u.raw)):
                return u.raw
            break
    return None


def find(words: Words) -> Setting | None:
    """The flag or environment variable ``words`` ask about, or None. The first one mentioned wins."""
    toks = words.tokens
    for t in toks:
        env = _env_word(t)
        if env is not None:
            value = next((v for i, v in words.assignments if i == t.index), None) or _value_after_still(words, t.index)
            return Setting("env", env, frozenset({t.index}), value)
        flag = _canonical_flag(t.norm) if t.norm.startswith("-") else None
        if flag is not None:
            return Setting("flag", flag, frozenset({t.index}))
        if "_" in t.norm and not t.norm.startswith(ENV_PREFIXES):
            dashed = t.norm.replace("_", "-")
            if dashed in flag_names():
                return Setting("flag", dashed, frozenset({t.index}))
    return _by_phrase(words)


@functools.cache
def _by_length() -> dict[int, list[tuple[tuple[str, ...], tuple[Literal["flag", "env"], str]]]]:
    out: dict[int, list[tuple[tuple[str, ...], tuple[Literal["flag", "env"], str]]]] = {}
    for k, v in _phrases().items():
        out.setdefault(len(k), []).append((k, v))
    return out


def _close(key: tuple[str, ...], n: int) -> tuple[Literal["flag", "env"], str] | None:
    """A phrase of several words with one of its longer words misspelt ("tensor paralel size")."""
    from rapidfuzz.distance import OSA

    for words, hit in _by_length().get(n, ()):
        typos = 0
        for a, b in zip(key, words, strict=True):
            if a == b:
                continue
            if len(b) >= 5 and a[:1] == b[:1] and OSA.distance(a, b, score_cutoff=1) <= 1:
                typos += 1
            else:
                typos = 9
                break
        if typos == 1:
            return hit
    return None


def _env_word(t: Token) -> str | None:
    if not _ENV_WORD.match(t.raw):
        return None
    if t.raw.isupper() or t.norm.startswith(ENV_PREFIXES):
        return t.raw.upper()
    return None


def _by_phrase(words: Words) -> Setting | None:
    # Each token's words ("gpu-memory-utilization" is three), with the token they came from.
    parts: list[tuple[str, int]] = []
    for t in words.tokens:
        if t.cjk:
            continue
        for w in _split(t.norm.lstrip("-")):
            parts.append((w, t.index))
    table = _phrases()
    longest = max((len(k) for k in table), default=0)
    # Exactly first; then with one misspelt word ("tensor paralel size").
    for exact in (True, False):
        for i in range(len(parts)):
            for n in range(min(longest, len(parts) - i), 0 if exact else 1, -1):
                key = tuple(w for w, _ in parts[i:i + n])
                hit = table.get(key) if exact else _close(key, n)
                if hit is None and exact and n >= 2 and key[0] in ("nccl", "cuda", "vllm", "hf"):
                    guess = "_".join(key).upper()
                    hit = ("env", guess) if guess in known_env() else None
                if hit is not None:
                    used = frozenset(idx for _, idx in parts[i:i + n])
                    value = None
                    if hit[0] == "env":
                        value = next((v for j, v in words.assignments if j in used), None) or _value_after_still(
                            words, max(used))
                    return Setting(hit[0], hit[1], used, value)
    return None
