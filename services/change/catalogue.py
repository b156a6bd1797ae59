"""vLLM's flags and the type of each value, per vLLM version, from the data file ``vllm_flags.toml``.

The table answers three questions for a settings change before anything is written: does this flag exist
(in any spelling a person types: ``-tp``, ``max_num_seqs``, ``max num seqs``; did-you-mean otherwise), what
kind of value does it take, and is this value one. It is the check of last resort: where the node's own vLLM
can parse the command line, the preflight asks it instead (``services/node/change.py``).
"""

from __future__ import annotations

import functools
import json
import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from services.models import FlagValue

FlagType = Literal["int", "float", "str", "choice", "bool", "switch", "json", "json-or-str", "json-list", "multi",
                   "multi-int", "append", "optional-str", "human-int"]
DATA = Path(__file__).with_name("vllm_flags.toml")
# vLLM's own reading of human-readable integers (arg_utils.human_readable_int).
_HUMAN_INT = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")
_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_TRUE = frozenset({"true", "on", "yes", "1", "enable", "enabled"})
_FALSE = frozenset({"false", "off", "no", "0", "disable", "disabled"})


class FlagInfo(BaseModel):
    """One flag of one vLLM version: its canonical long name (no dashes) and the kind of value it takes."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str
    type: FlagType
    choices: tuple[str, ...] = ()
    also: tuple[str, ...] = ()  # words accepted besides the type (max-model-len's "auto")
    aliases: tuple[str, ...] = ()  # short forms without the dash ("tp")
    model: bool = False  # the model itself: not a setting a change may touch

    @property
    def negatable(self) -> bool:
        """True when vLLM also has ``--no-NAME`` (argparse.BooleanOptionalAction)."""
        return self.type == "bool"

    @property
    def takes_value(self) -> bool:
        """False for the flags that are only present or absent (and ``--no-``)."""
        return self.type not in ("bool", "switch")

    @property
    def multi(self) -> bool:
        """True for nargs="+" flags: every following word belongs to them."""
        return self.type in ("multi", "multi-int")

    def describe(self) -> str:
        """The kind of value, for people: "an integer", "one of fcfs, priority", "JSON"."""
        return {
            "int": "an integer", "float": "a number", "str": "a word", "bool": "on or off (--x / --no-x)",
            "switch": "on (present) or absent", "json": "a JSON object", "json-or-str": "a word or a JSON object",
            "json-list": "a JSON list", "multi": "one or more words", "multi-int": "one or more integers",
            "append": "a word", "optional-str": "a word, or nothing", "human-int": "an integer (1k, 64K, 2M …)",
            "choice": "one of " + ", ".join(self.choices),
        }[self.type]


class VersionTable(BaseModel):
    """The flags of one vLLM version (``key``: major.minor)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    key: str
    released: str
    flags: dict[str, FlagInfo]
    removed: dict[str, str] = Field(default_factory=dict)  # name -> why it is gone

    @functools.cached_property
    def aliases(self) -> dict[str, str]:
        """Short alias (no dash) -> canonical name."""
        return {a: f.name for f in self.flags.values() for a in f.aliases}


class Resolved(BaseModel):
    """A name a person typed, resolved: the flag, and whether it was the ``--no-`` form."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    flag: FlagInfo
    negated: bool = False


class Unknown(BaseModel):
    """A name that is no flag of the table, with what the person may have meant."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    typed: str
    suggestions: tuple[str, ...] = ()
    removed: str | None = None  # why, when vLLM had the flag once

    def reason(self, version: str) -> str:
        """One line: ``--max-num-seq`` is no flag of vLLM 0.20 — did you mean --max-num-seqs?"""
        if self.removed:
            return f"--{self.typed} was {self.removed}"
        hint = (" — did you mean " + " or ".join(f"--{s}" for s in self.suggestions) + "?") if self.suggestions else ""
        return f"{_shown(self.typed)} is not a flag of vLLM {version}{hint}"


def _shown(typed: str) -> str:
    return typed if typed.startswith("-") else f"--{typed}"


@functools.cache
def load() -> dict[str, VersionTable]:
    """Every version table of the data file, by major.minor."""
    raw = tomllib.loads(DATA.read_text(encoding="utf-8"))
    tables: dict[str, VersionTable] = {}
    for key, data in raw["versions"].items():
        flags = {name: FlagInfo(name=name, **spec) for name, spec in data["flags"].items()}
        tables[key] = VersionTable(key=key, released=data["released"], flags=flags, removed=data.get("removed", {}))
    return tables


def _version_key(key: str) -> tuple[int, ...]:
    return tuple(int(p) for p in key.split("."))


def table_for(version: str | None) -> tuple[VersionTable, str | None]:
    """The table for a running vLLM ``version`` ("0.20.1"), and a note when it is not that version's own.

    An unknown or unreadable version gets the newest table; the note says so (the preflight shows it).
    """
    tables = load()
    newest = tables[max(tables, key=_version_key)]
    if version:
        m = re.match(r"(\d+)\.(\d+)", version)
        if m and f"{m.group(1)}.{m.group(2)}" in tables:
            return tables[f"{m.group(1)}.{m.group(2)}"], None
        return newest, f"inferbot has no table of vLLM {version}'s flags; it checked with vLLM {newest.key}'s"
    return newest, f"the vLLM version is unknown; inferbot checked with vLLM {newest.key}'s flags"


def normalise(typed: str) -> str:
    """A flag name as vLLM's parser reads it: no leading dashes, ``_`` and spaces as ``-``, lower case."""
    return re.sub(r"[_\s]+", "-", typed.strip().lstrip("-").lower())


def resolve(table: VersionTable, typed: str) -> Resolved | Unknown:
    """The flag ``typed`` names (``--max-num-seqs``, ``-tp``, ``max_num_seqs``, ``max num seqs``, ``--no-x``)."""
    single_dash = typed.startswith("-") and not typed.startswith("--")
    name = normalise(typed)
    if single_dash and name in table.aliases:
        return Resolved(flag=table.flags[table.aliases[name]])
    if name in table.flags:
        return Resolved(flag=table.flags[name])
    if name.startswith("no-") and name[3:] in table.flags and table.flags[name[3:]].negatable:
        return Resolved(flag=table.flags[name[3:]], negated=True)
    if not single_dash and name in table.aliases and not typed.startswith("--"):
        return Resolved(flag=table.flags[table.aliases[name]])
    if name in table.removed:
        return Unknown(typed=name, removed=table.removed[name])
    return Unknown(typed=typed.strip() if single_dash else name, suggestions=suggest(table, name))


def suggest(table: VersionTable, name: str, limit: int = 2) -> tuple[str, ...]:
    """Flags whose name is close to ``name`` (a typo, a missing letter, a prefix of exactly one flag)."""
    prefixed = [n for n in table.flags if n.startswith(name)] if len(name) >= 4 else []
    if len(prefixed) == 1:
        return (prefixed[0],)
    from rapidfuzz import fuzz, process  # only a flag name that names nothing pays for the import (~3 MB RSS)

    found = process.extract(name, list(table.flags), scorer=fuzz.ratio, limit=limit, score_cutoff=80)
    return tuple(n for n, _score, _ in found)


def parse_bool(word: str) -> bool | None:
    """``true``/``on``/``yes``/``1`` → True, ``false``/``off``/``no``/``0`` → False, anything else None."""
    w = word.strip().lower()
    return True if w in _TRUE else False if w in _FALSE else None


def _human_int(value: str) -> bool:
    m = _HUMAN_INT.fullmatch(value.strip())
    if m:
        number, suffix = m.groups()
        return suffix in _DECIMAL or "." not in number  # vLLM refuses decimals with binary suffixes
    return _int(value)


def _int(value: str) -> bool:
    try:
        int(value)
    except ValueError:
        return False
    return True


def _float(value: str) -> bool:
    try:
        float(value)
    except ValueError:
        return False
    return True


def _json(value: str, want: type | None) -> str | None:
    try:
        parsed = json.loads(value)
    except ValueError as e:
        return f"is not valid JSON ({e})"
    if want is not None and not isinstance(parsed, want):
        return "must be a JSON " + ("object {…}" if want is dict else "list […]")
    return None


def value_error(flag: FlagInfo, value: FlagValue) -> str | None:
    """Why ``value`` is not a value of ``flag`` (one line without the flag's name), or None when it is."""
    if flag.type in ("bool", "switch"):
        if not isinstance(value, bool):
            return "takes no value: write --NAME to turn it on" + (" and --no-NAME to turn it off"
                                                                   if flag.negatable else "")
        return None
    if isinstance(value, bool):
        return "needs a value (" + flag.describe() + ")" if not (flag.type == "optional-str" and value) else None
    if isinstance(value, list):
        if not flag.multi:
            return "takes one value, not several"
        bad = [v for v in value if flag.type == "multi-int" and not _int(v)]
        return f"wants integers, not {', '.join(repr(b) for b in bad)}" if bad else None
    if flag.multi:
        return value_error(flag, [value])
    if value in flag.also:
        return None
    checks = {
        "int": lambda v: None if _int(v) else f"wants an integer, not {v!r}",
        "float": lambda v: None if _float(v) else f"wants a number, not {v!r}",
        "human-int": lambda v: None if _human_int(v) else f"wants an integer (like 65536, 64k or 64K), not {v!r}",
        "choice": lambda v: None if v in flag.choices else f"wants one of {', '.join(flag.choices)}, not {v!r}",
        "json": lambda v: _json(v, dict),
        "json-list": lambda v: _json(v, list),
        "json-or-str": lambda v: _json(v, dict) if v.lstrip().startswith("{") else None,
    }
    check = checks.get(flag.type)
    return check(value) if check is not None else None
