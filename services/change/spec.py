"""What a person asked to change, as typed values: ``ChangeSpec``, parsed from chat text or terminal options.

Chat: the words after the verb — ``set max-num-seqs 256``, ``set --speculative-config '{"method":"ngram"}'``,
``unset --enforce-eager``, ``set env NCCL_PROTO=Simple``, ``unset env NCCL_ALGO``, several at once
(``--max-model-len 65536 --max-num-seqs 128``); values are quoted shell-style (``shlex`` in POSIX mode), a quoted
value is one argument. Terminal: ``--set NAME=VALUE --unset NAME --env NAME=VALUE --unset-env NAME``. Names
resolve as the ``flag`` answer reads them (``-tp``, ``max_num_seqs``, ``max num seqs``), with did-you-mean.

Nothing here reaches a shell: the result is typed values that the drop-in writer quotes for systemd.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from services.change import catalogue
from services.change.catalogue import FlagInfo, Resolved, Unknown, VersionTable
from services.models import FlagValue

Verb = Literal["set", "unset", "change"]
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_ENV_ASSIGN = re.compile(r"^([A-Z_][A-Z0-9_]*)=(.*)\Z", re.S)  # all capitals: an environment variable
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_ENV_WORDS = frozenset({"env", "environment", "--env", "-e", "envvar"})
_UNSET_WORDS = frozenset({"unset", "--unset", "remove", "drop"})
_UNSET_ENV_WORDS = frozenset({"unset-env", "--unset-env"})
_SET_WORDS = frozenset({"--set"})
MAX_WORDS_IN_NAME = 6
MAX_VALUE_CHARS = 16384


class ChangeSpec(BaseModel):
    """A settings change: flags to set (canonical long name → value; True/False for ``--x``/``--no-x``, a list
    for multi-value flags) and to remove, environment variables to set and to remove."""

    model_config = ConfigDict(extra="forbid")
    set_flags: dict[str, FlagValue] = Field(default_factory=dict)
    unset_flags: list[str] = Field(default_factory=list)
    set_env: dict[str, str] = Field(default_factory=dict)
    unset_env: list[str] = Field(default_factory=list)

    def is_empty(self) -> bool:
        """True when nothing is asked."""
        return not (self.set_flags or self.unset_flags or self.set_env or self.unset_env)

    def names(self) -> list[str]:
        """Every flag (``--x``) and variable named, in the order asked."""
        return ([f"--{n}" for n in (*self.set_flags, *self.unset_flags)] + [*self.set_env, *self.unset_env])


class SpecError(BaseModel):
    """Why the text is not a change, in one friendly line, and what the person may have meant."""

    model_config = ConfigDict(extra="forbid")
    message: str
    suggestions: list[str] = Field(default_factory=list)
    unknown: str | None = None  # the name that is no flag, when that is why


class _Refused(Exception):
    def __init__(self, message: str, suggestions: tuple[str, ...] = (), unknown: str | None = None) -> None:
        super().__init__(message)
        self.message, self.suggestions, self.unknown = message, list(suggestions), unknown


class _Builder:
    """Collects a spec, refusing contradictions (the same flag set twice differently, set and unset)."""

    def __init__(self, table: VersionTable) -> None:
        self.table = table
        self.spec = ChangeSpec()

    def resolve(self, typed: str) -> Resolved:
        found = catalogue.resolve(self.table, typed)
        if isinstance(found, Unknown):
            raise _Refused(found.reason(self.table.key), found.suggestions, found.typed)
        if found.flag.model:
            raise _Refused("changing which model a service serves is an edit of its unit, not a setting: "
                           "inferbot changes flags and environment variables only")
        return found

    def set_flag(self, flag: FlagInfo, value: FlagValue) -> None:
        _check_text(f"--{flag.name}", value)
        if flag.type == "switch" and value is False:
            self.unset_flag(flag)  # a store_true flag has no --no- form: off means absent
            return
        problem = catalogue.value_error(flag, value)
        if problem:
            raise _Refused(f"--{flag.name} {problem}")
        if flag.name in self.spec.unset_flags or self.spec.set_flags.get(flag.name, value) != value:
            raise _Refused(f"--{flag.name} is asked twice with different values: say it once")
        self.spec.set_flags[flag.name] = value

    def unset_flag(self, flag: FlagInfo) -> None:
        if flag.name in self.spec.set_flags:
            raise _Refused(f"--{flag.name} is both set and unset: say one")
        if flag.name not in self.spec.unset_flags:
            self.spec.unset_flags.append(flag.name)

    def set_env(self, name: str, value: str) -> None:
        _env_name(name)
        _check_text(name, value)
        if name in self.spec.unset_env or self.spec.set_env.get(name, value) != value:
            raise _Refused(f"{name} is asked twice with different values: say it once")
        self.spec.set_env[name] = value

    def unset_env(self, name: str) -> None:
        _env_name(name)
        if name in self.spec.set_env:
            raise _Refused(f"{name} is both set and unset: say one")
        if name not in self.spec.unset_env:
            self.spec.unset_env.append(name)


def _env_name(name: str) -> None:
    if not ENV_NAME.match(name):
        raise _Refused(f"{name!r} is not an environment variable name (letters, digits and _, like NCCL_PROTO)")


def _check_text(name: str, value: FlagValue) -> None:
    for v in value if isinstance(value, list) else [value] if isinstance(value, str) else []:
        if "\n" in v or "\r" in v or "\0" in v:
            raise _Refused(f"the value of {name} has a line break: a unit file cannot pass one on — write it on "
                           "one line")
        if len(v) > MAX_VALUE_CHARS:
            raise _Refused(f"the value of {name} is longer than {MAX_VALUE_CHARS:,} characters")


def _looks_like_flag(tok: str) -> bool:
    return tok.startswith("-") and tok != "-" and not _NEGATIVE_NUMBER.match(tok)


def _split_words(text: str) -> list[str]:
    try:
        return shlex.split(text, posix=True)
    except ValueError as e:
        if "quotation" in str(e):
            raise _Refused("the quotes do not match: a value that starts with ' or \" must end with the same quote "
                           "(shell-style, like --x '{\"a\": 1}')") from e
        raise _Refused(f"that text cannot be read as shell words: {e}") from e


class _ChatReader:
    """Reads the words of one chat change, left to right."""

    def __init__(self, words: list[str], builder: _Builder, verb: Verb) -> None:
        self.words, self.b, self.verb, self.i = words, builder, verb, 0

    def peek(self) -> str | None:
        return self.words[self.i] if self.i < len(self.words) else None

    def take(self) -> str:
        word = self.words[self.i]
        self.i += 1
        return word

    def read(self) -> None:
        while self.peek() is not None:
            word = self.take()
            low = word.lower()
            if low in _ENV_WORDS:
                self.env_items(unset=self.verb == "unset")
            elif low in _UNSET_ENV_WORDS:
                self.env_items(unset=True)
            elif low in _UNSET_WORDS and self.verb == "change":
                self.b.unset_flag(self.name_words(self.take_required(word)).flag)
            elif low in _SET_WORDS:
                self.flag(self.take_required(word), force_set=True)
            elif _ENV_ASSIGN.match(word) and self.verb != "unset":
                m = _ENV_ASSIGN.match(word)
                assert m is not None
                self.b.set_env(m.group(1), m.group(2))
            elif self.verb == "unset" and ENV_NAME.match(word) and word.isupper():
                self.b.unset_env(word)
            else:
                self.flag(word)

    def take_required(self, after: str) -> str:
        if self.peek() is None:
            raise _Refused(f"`{after}` needs a name after it")
        return self.take()

    def env_items(self, unset: bool) -> None:
        count = 0
        while (word := self.peek()) is not None and not _looks_like_flag(word) and word.lower() not in _ENV_WORDS:
            name, eq, value = word.partition("=")
            if unset:
                if eq:
                    raise _Refused(f"to remove {name} say `unset env {name}` (no value)")
                self.b.unset_env(name)
            elif not eq:
                if count:
                    break
                raise _Refused(f"`env {word}` needs a value: env {word}=VALUE")
            else:
                self.b.set_env(name, value)
            self.take()
            count += 1
        if not count:
            raise _Refused("`env` needs a variable after it: env NAME=VALUE" + (" (or env NAME to unset)"
                                                                              if unset else ""))

    def name_words(self, first: str) -> Resolved:
        """The flag named by ``first`` and, for words spelled with spaces, the longest run that is a flag."""
        if _looks_like_flag(first) or "=" in first:
            return self.b.resolve(first.partition("=")[0])
        best: tuple[int, Resolved] | None = None
        for n in range(min(MAX_WORDS_IN_NAME, len(self.words) - self.i + 1), 1, -1):
            joined = "-".join([first, *self.words[self.i : self.i + n - 1]])
            found = catalogue.resolve(self.b.table, joined)
            if isinstance(found, Resolved):
                best = (n, found)
                break
        if best is not None:
            self.i += best[0] - 1
            return best[1]
        return self.b.resolve(first)

    def flag(self, word: str, force_set: bool = False) -> None:
        explicit: str | None = None
        if "=" in word and not word.startswith("{"):
            word, _, explicit = word.partition("=")
        if not word:
            raise _Refused("a flag name is missing before '='")
        found = self.name_words(word)
        flag = found.flag
        if self.verb == "unset" and not force_set:
            if explicit is not None:
                raise _Refused(f"to remove --{flag.name} say `unset --{flag.name}` (no value)")
            if found.negated:
                raise _Refused(f"to turn --{flag.name} off say `set --no-{flag.name}`; `unset --{flag.name}` "
                               "removes it")
            self.b.unset_flag(flag)
            return
        self.b.set_flag(flag, self.value(flag, found.negated, explicit))

    def value(self, flag: FlagInfo, negated: bool, explicit: str | None) -> FlagValue:
        if not flag.takes_value:
            if negated:
                if explicit is not None:
                    raise _Refused(f"--no-{flag.name} takes no value")
                return False
            word = explicit if explicit is not None else self.peek()
            state = catalogue.parse_bool(word) if word is not None else None
            if state is None:
                if explicit is not None:
                    raise _Refused(f"--{flag.name} is on or off, not {explicit!r}")
                return True
            if explicit is None:
                self.take()
            return state
        if explicit is not None:
            return [explicit] if flag.multi else explicit
        if flag.multi:
            values: list[str] = []
            while (w := self.peek()) is not None and not _looks_like_flag(w) and w.lower() not in _ENV_WORDS:
                values.append(self.take())
            if values:
                return values
        elif (w := self.peek()) is not None and not _looks_like_flag(w):
            return self.take()
        if flag.type == "optional-str":
            return True
        raise _Refused(f"--{flag.name} needs a value ({flag.describe()})")


def _run(build: _Builder, fill: Callable[[], None]) -> ChangeSpec | SpecError:
    try:
        fill()
    except _Refused as r:
        return SpecError(message=r.message, suggestions=r.suggestions, unknown=r.unknown)
    if build.spec.is_empty():
        return SpecError(message="nothing to change: say what, e.g. `set max-num-seqs 256 on kimi`, "
                                 "`unset --enforce-eager on kimi` or `set env NCCL_PROTO=Simple on kimi`")
    return build.spec


def parse_text(verb: Verb, text: str, table: VersionTable | None = None) -> ChangeSpec | SpecError:
    """The change that ``text`` (the words after ``set``/``unset``/``change``, without the service) asks for.

    ``table``: the flags to resolve names with (default the newest vLLM table; the preflight checks again
    with the node's own version). Unbalanced quotes, unknown flags (with did-you-mean), a value of the wrong
    type, a line break in a value and contradictions are a ``SpecError`` with one friendly line.
    """
    build = _Builder(table or catalogue.table_for(None)[0])

    def fill() -> None:
        _ChatReader(_split_words(text), build, verb).read()

    return _run(build, fill)


def parse_options(set_: list[str], unset: list[str], env: list[str], unset_env: list[str],
                  table: VersionTable | None = None) -> ChangeSpec | SpecError:
    """The change the terminal's ``--set NAME=VALUE --unset NAME --env NAME=VALUE --unset-env NAME`` ask for.

    Each option's argument is one word as the shell gave it (never split again), except that a multi-value
    flag's value is split shell-style (``--set 'served-model-name=a b'``). ``--set enforce-eager`` and
    ``--set no-enforce-eager`` turn a switch on and off.
    """
    build = _Builder(table or catalogue.table_for(None)[0])

    def fill() -> None:
        for item in set_:
            name, eq, value = item.partition("=")
            found = build.resolve(name)
            flag = found.flag
            if not flag.takes_value:
                state = True if not eq else catalogue.parse_bool(value)
                if state is None:
                    raise _Refused(f"--{flag.name} is on or off, not {value!r}")
                build.set_flag(flag, (not state) if found.negated else state)
            elif not eq:
                raise _Refused(f"--set {name} needs a value: --set {name}=VALUE ({flag.describe()})")
            else:
                build.set_flag(flag, _split_words(value) if flag.multi else value)
        for name in unset:
            build.unset_flag(build.resolve(name).flag)
        for item in env:
            name, eq, value = item.partition("=")
            if not eq:
                raise _Refused(f"--env {name} needs a value: --env {name}=VALUE")
            build.set_env(name, value)
        for name in unset_env:
            build.unset_env(name)

    return _run(build, fill)
