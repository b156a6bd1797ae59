"""The value a setting question checks, written the way the setting takes it: ``NCCL_PROTO=LL`` → "LL", "32k
context" → "32768", "mem util 92%" → "0.92", "16MiB" → "16777216", "bf16" → "bfloat16", "O2" → "2", "the Ring
algo" → "Ring"; and the values that name their setting on their own ("qwen on bf16?" is ``--dtype``).

The values each setting takes are data (``data/flags.toml``, ``[values]``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from bot.understanding.text import Token, Words
from bot.understanding.wordlists import flags_data

_NUMBER = re.compile(r"^(\d+(?:\.\d+)?)(k|%|kib|kb|mib|mb|gib|gb)?$")
_BYTES = {"kib": 1 << 10, "kb": 1 << 10, "mib": 1 << 20, "mb": 1 << 20, "gib": 1 << 30, "gb": 1 << 30}
_FRACTIONS = frozenset({"gpu-memory-utilization"})  # a percentage is written as a fraction
_GIB_COUNTS = frozenset({"cpu-offload-gb", "swap-space"})  # a size is written in GiB
_TIME_UNITS = frozenset("s sec secs second seconds m min mins minute minutes h hr hrs hour hours d day days "
                        "w week weeks am pm".split())
# After "still": the value asked about ("are we still on Ring?"), past these words.
_NOT_A_VALUE = frozenset("on at using set to the a an with running for in is was".split())
# A number with "k" names the context length when what follows it says so, or nothing does ("does kimi do 128k").
_CONTEXT_AFTER = frozenset({"context", "ctx", "tokens", "token", "window", "prompt", "prompts", "len", "length"})


@functools.cache
def _table() -> dict[str, dict[str, str]]:
    """Per setting: each value as typed (lower case) → as written; values marked "!" under "!"."""
    out: dict[str, dict[str, str]] = {}
    for name, vals in flags_data()["values"].items():
        table = out.setdefault(name, {})
        for v in vals:
            naming = v.startswith("!")
            typed, _, written = v.lstrip("!").partition("=")
            table[typed.lower()] = written or typed
            if naming:
                out.setdefault("!", {})[typed.lower()] = name
    return out


def normal(name: str, raw: str) -> str:
    """``raw`` as the setting ``name`` takes it."""
    known = _table().get(name, {})
    if raw.lower() in known:
        return known[raw.lower()]
    m = _NUMBER.match(raw.lower())
    if not m or not m.group(2):
        return raw
    number, unit = float(m.group(1)), m.group(2)
    if unit == "k":
        return str(int(number * 1024))  # in context lengths, as people mean it
    if unit == "%":
        return f"{number / 100:g}" if name in _FRACTIONS else raw
    if name in _GIB_COUNTS:
        return f"{number * _BYTES[unit] / (1 << 30):g}"
    return str(int(number * _BYTES[unit]))


def _is_time(tokens: tuple[Token, ...], i: int) -> bool:
    nxt = tokens[i + 1].norm if i + 1 < len(tokens) else ""
    prev = tokens[i - 1].norm if i > 0 else ""
    return nxt in _TIME_UNITS or prev in ("in", "last", "past", "since")


def of(words: Words, name: str, named: Iterable[int], skip: Iterable[int] = ()) -> str | None:
    """The value the message gives the setting ``name`` (named by the tokens ``named``), or None: written to
    it (``NAME=VALUE``), one of the values it takes, after "still", or a number in its sentence."""
    named, skip = set(named), set(skip)
    for i, v in words.assignments:
        if i in named:
            return normal(name, v)
    toks = words.tokens
    known = _table().get(name, {})
    for t in toks:  # a value word may be one of the setting's own ("kv cache + fp8", "using ray")
        if t.index not in skip and t.norm in known and (len(t.norm) > 2 or t.raw.isupper()):
            return known[t.norm]
    still = _after_still(toks, named) or _set_to(toks, named | skip)
    if still is not None:
        return normal(name, still)
    clauses = {toks[i].clause for i in named if i < len(toks)}
    for i, t in enumerate(toks):
        if (t.clause in clauses and t.index not in named | skip and _NUMBER.match(t.norm)
                and not _is_time(toks, i)):
            return normal(name, t.norm)
    return None


def _set_to(toks: tuple[Token, ...], skip: set[int]) -> str | None:
    """"is the performance mode set to throughput": the word after "set to"."""
    for a, b, c in zip(toks, toks[1:], toks[2:], strict=False):
        if a.norm == "set" and b.norm == "to" and c.index not in skip and c.norm not in _NOT_A_VALUE:
            return c.raw
    return None


def _after_still(toks: tuple[Token, ...], named: set[int]) -> str | None:
    for i, t in enumerate(toks):
        if t.norm != "still":
            continue
        for u in toks[i + 1:i + 4]:
            if u.norm in _NOT_A_VALUE:
                continue
            if u.index not in named and (u.raw.isupper() or u.raw[:1].isupper()):
                return u.raw
            break
    return None


def naming(words: Words) -> tuple[str, str, int, str] | None:
    """A value only one setting takes, and the setting: ("flag" or "env", name, its token, the value)."""
    names = _table().get("!", {})
    toks = words.tokens
    for i, t in enumerate(toks):
        name = names.get(t.norm)
        if name is not None and (len(t.norm) > 2 or t.raw.isupper()):
            return ("env" if name.isupper() else "flag", name, t.index, normal(name, t.norm))
        m = _NUMBER.match(t.norm)
        if m and m.group(2) == "k":
            nxt = toks[i + 1] if i + 1 < len(toks) and toks[i + 1].part == t.part else None
            if nxt is None or nxt.norm in _CONTEXT_AFTER:
                return ("flag", "max-model-len", t.index, normal("max-model-len", t.norm))
    return None
