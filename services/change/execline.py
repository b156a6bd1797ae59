"""The operator's ``ExecStart=`` line as words, and the same line with a change applied.

Only units whose ``ExecStart=`` runs vLLM itself are changed — ``…/vllm serve MODEL …``,
``python -m vllm.entrypoints.openai.api_server …``, ``python -m vllm.entrypoints.cli.main serve …`` — because only
there is every word after the program vLLM's own. A word inferbot does not change keeps the operator's text
byte for byte (quoting, ``%`` specifiers, ``$VAR`` included); a word it writes is quoted by
``services/change/dropin.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from services.change import catalogue
from services.change.catalogue import Resolved, VersionTable
from services.models import FlagValue
from services.parse.unitfile import command_word_spans

_PREFIX_CHARS = "-@:+!|"
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?\Z")
_PYTHON_OPTS = frozenset({"-u", "-B", "-s", "-E", "-I", "-O", "-OO", "-q", "-P"})
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_WHOLE_VAR = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_]*)\Z")
_BRACED_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
SUPPORTED = ("`…/vllm serve MODEL …`, `python -m vllm.entrypoints.openai.api_server …` or "
             "`python -m vllm.entrypoints.cli.main serve …`")


class NotVllm(Exception):
    """The unit's ExecStart= does not run vLLM directly; ``str()`` is the one-line reason."""


@dataclass
class Word:
    """One word of the operator's line: its value as systemd reads it (``$VAR`` unexpanded) and its text."""

    value: str
    text: str


@dataclass
class Occurrence:
    """Where a flag is on the line: the indices of its own word and of its value words."""

    name: str
    first: int
    last: int  # inclusive
    negated: bool = False


@dataclass
class ExecLine:
    """The operator's ExecStart= split: the words up to vLLM's arguments, then the arguments."""

    words: list[Word]
    args_from: int  # index of the first word vLLM's parser reads
    form: str  # "vllm serve", "api_server module", "cli.main serve"
    occurrences: list[Occurrence] = field(default_factory=list)
    variables: dict[int, str] = field(default_factory=dict)  # index of a whole-word $VAR -> its name

    @property
    def program(self) -> str:
        """The program systemd starts (prefixes removed)."""
        return self.words[0].value.lstrip(_PREFIX_CHARS)

    def of(self, name: str) -> list[Occurrence]:
        """Every place the flag ``name`` is written on the line (``--no-name`` included)."""
        return [o for o in self.occurrences if o.name == name]


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _looks_like_flag(value: str) -> bool:
    return value.startswith("-") and value != "-" and not _NEGATIVE_NUMBER.match(value)


def split(line: str, specifiers: Mapping[str, str]) -> ExecLine:
    """Recognise ``line`` (an ``ExecStart=`` value) as a direct vLLM start, or raise ``NotVllm``."""
    words = [Word(value=v, text=line[a:b]) for v, a, b in command_word_spans(line, specifiers)]
    if not words:
        raise NotVllm("the unit has no ExecStart= line")
    first = words[0].value
    prefix = first[: len(first) - len(first.lstrip(_PREFIX_CHARS))]
    program = first.lstrip(_PREFIX_CHARS)
    shown = " ".join(w.value for w in words[:3])[:80]
    refuse = NotVllm(f"inferbot changes only units whose ExecStart= runs vLLM itself ({SUPPORTED}); this one runs "
                     f"`{shown} …`")
    if "@" in prefix or ";" in [w.text for w in words]:
        raise refuse
    values = [w.value for w in words]
    if _base(program) == "vllm" and values[1:2] == ["serve"]:
        return ExecLine(words=words, args_from=2, form="vllm serve")
    if _PYTHON.match(_base(program)):
        i = 1
        while i < len(values) and values[i] in _PYTHON_OPTS:
            i += 1
        if values[i : i + 2] == ["-m", "vllm.entrypoints.openai.api_server"]:
            return ExecLine(words=words, args_from=i + 2, form="api_server module")
        if values[i : i + 3] == ["-m", "vllm.entrypoints.cli.main", "serve"]:
            return ExecLine(words=words, args_from=i + 3, form="cli.main serve")
    raise refuse


def _value_words(flag: Resolved | None, values: list[str], at: int) -> int:
    """How many words after the flag at ``at`` are its value (0 for switches)."""
    nxt = values[at + 1] if at + 1 < len(values) else None
    if flag is not None and not flag.flag.takes_value:
        return 0
    if flag is not None and flag.flag.multi:
        n = 0
        while at + 1 + n < len(values) and not _looks_like_flag(values[at + 1 + n]):
            n += 1
        return n
    return 1 if nxt is not None and not _looks_like_flag(nxt) else 0


def scan(line: ExecLine, table: VersionTable) -> ExecLine:
    """Find every flag on the line (canonical names, as vLLM's parser reads them) and every whole-word $VAR."""
    values = [w.value for w in line.words]
    i = line.args_from
    while i < len(values):
        value = values[i]
        var = _WHOLE_VAR.match(value)
        if var:
            line.variables[i] = var.group(1)
            i += 1
            continue
        if not _looks_like_flag(value):
            i += 1
            continue
        name, eq, _ = value.partition("=")
        if re.fullmatch(r"-O=?\d*", name) or name == "-O":
            level = catalogue.resolve(table, "optimization-level")
            found: Resolved | None = level if isinstance(level, Resolved) else None
            glued = bool(re.fullmatch(r"-O=?\d+", value))
            n = 0 if glued or eq else _value_words(found, values, i)
        else:
            resolved = catalogue.resolve(table, name)
            found = resolved if isinstance(resolved, Resolved) else None
            n = 0 if eq else _value_words(found, values, i)
        canonical = found.flag.name if found else catalogue.normalise(name)
        line.occurrences.append(Occurrence(canonical, i, i + n, negated=bool(found and found.negated)))
        i += n + 1
    return line


def variable_words(line: ExecLine, env: Mapping[str, str]) -> dict[str, list[str]]:
    """For each whole-word ``$VAR`` whose value is known: the words it expands to (systemd splits it)."""
    out: dict[str, list[str]] = {}
    for name in line.variables.values():
        if name in env:
            out[name] = env[name].split()
    return out


def render_flag(name: str, value: FlagValue) -> list[str]:
    """The words that set flag ``name`` to ``value`` (``--x``, ``--no-x``, ``--x v``, ``--x=-v``, ``--x a b``)."""
    if value is True:
        return [f"--{name}"]
    if value is False:
        return [f"--no-{name}"]
    if isinstance(value, list):
        return [f"--{name}", *value]
    if _looks_like_flag(value) or value.startswith("-"):
        return [f"--{name}={value}"]  # a value that starts with "-" would be read as an option
    return [f"--{name}", value]


@dataclass
class Edited:
    """The new line: each entry is either an operator word (kept text) or a word inferbot writes."""

    kept: list[tuple[str, bool]]  # (text or value, True when it is inferbot's value to be quoted)

    def text(self, quote: Callable[[str], str]) -> str:
        """The ``ExecStart=`` value, inferbot's words quoted with ``quote``."""
        return " ".join(quote(t) if ours else t for t, ours in self.kept)


def apply(line: ExecLine, set_flags: Mapping[str, FlagValue], unset_flags: list[str]) -> Edited:
    """The operator's line with ``set_flags`` written (in place of the last occurrence, else appended) and every
    occurrence of ``unset_flags`` (and of the flags set, but the replaced one) removed."""
    drop: set[int] = set()
    replace: dict[int, list[str]] = {}
    append: list[str] = []
    for name, value in set_flags.items():
        found = line.of(name)
        for o in found[:-1]:
            drop.update(range(o.first, o.last + 1))
        if found:
            last = found[-1]
            drop.update(range(last.first + 1, last.last + 1))
            replace[last.first] = render_flag(name, value)
        else:
            append += render_flag(name, value)
    for name in unset_flags:
        for o in line.of(name):
            drop.update(range(o.first, o.last + 1))
    kept: list[tuple[str, bool]] = []
    for i, w in enumerate(line.words):
        if i in replace:
            kept += [(v, True) for v in replace[i]]
        elif i not in drop:
            kept.append((w.text, False))
    kept += [(v, True) for v in append]
    return Edited(kept=kept)
