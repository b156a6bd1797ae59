"""The simulated systemd's own reading of unit-file syntax, independent of ``services.parse.unitfile``.

The simulator must not share the product's parser: a quoting bug there would then be "right" on both
sides and no test could fail. This module is written separately from systemd.syntax(7),
systemd.service(5) and systemd.exec(5) (as systemd 252 behaves, checked against the real-systemd tier in
tests/systemd), and is deliberately small: only what the simulator needs to run a unit.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_WS = " \t\n\r"
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "s": " ",
                   "\\": "\\", '"': '"', "'": "'"}


def unit_lines(text: str) -> Iterator[str]:
    """The logical lines of a unit file: continuations joined, comments and blank lines dropped.

    A trailing backslash joins the next line with a space; comment lines in the middle of a continued
    line are skipped and the continuation goes on (systemd.syntax(7)).
    """
    parts: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if line[:1] in ("#", ";"):
            continue
        if not parts and not line:
            continue
        if line.endswith("\\"):
            parts.append(line[:-1])
            parts.append(" ")
            continue
        parts.append(line)
        joined = "".join(parts).strip()
        parts = []
        if joined:
            yield joined
    if parts:
        joined = "".join(parts).strip()
        if joined:
            yield joined


def _escape(s: str, i: int) -> tuple[str, int]:
    """The C-style escape starting after the backslash at ``s[i-1]``: (text, next index)."""
    if i >= len(s):
        return "", i
    c = s[i]
    if c in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[c], i + 1
    if c == "x" and re.match(r"[0-9a-fA-F]{2}", s[i + 1:i + 3]):
        return chr(int(s[i + 1:i + 3], 16)), i + 3
    if c == "u" and re.match(r"[0-9a-fA-F]{4}", s[i + 1:i + 5]):
        return chr(int(s[i + 1:i + 5], 16)), i + 5
    if c == "U" and re.match(r"[0-9a-fA-F]{8}", s[i + 1:i + 9]):
        return chr(int(s[i + 1:i + 9], 16)), i + 9
    if re.match(r"[0-7]{3}", s[i:i + 3]):
        return chr(int(s[i:i + 3], 8)), i + 3
    return c, i + 1  # unknown escape: systemd warns; keep the character


def words(text: str, cunescape: bool = True, plain: list[bool] | None = None) -> list[str]:
    """Split like systemd's ``extract_first_word(UNQUOTE|CUNESCAPE)``: whitespace separates words,
    ``"..."``/``'...'`` group (also in the middle of a word, as systemd 252 does), backslash escapes in
    and out of quotes (without ``cunescape`` a backslash just makes the next character literal). ``plain``,
    when given, receives for each word whether it was written with no quote and no escape."""
    out: list[str] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WS:
            i += 1
        if i >= n:
            return out
        if plain is not None:
            end = i
            while end < n and text[end] not in _WS:
                end += 1
            plain.append(not any(c in "\"'\\" for c in text[i:end]))
        buf: list[str] = []
        quote = ""
        while i < n:
            c = text[i]
            if c == "\\":
                if cunescape:
                    piece, i = _escape(text, i + 1)
                else:
                    piece, i = text[i + 1:i + 2] or "\\", i + 2
                buf.append(piece)
                continue
            if quote:
                if c == quote:
                    quote = ""
                else:
                    buf.append(c)
                i += 1
                continue
            if c in "\"'":
                quote = c
                i += 1
                continue
            if c in _WS:
                break
            buf.append(c)
            i += 1
        out.append("".join(buf))


def expand_specifiers(word: str, spec: Mapping[str, str]) -> str:
    """``%x`` → its value; ``%%`` → ``%``; an unknown specifier stays as written."""
    out: list[str] = []
    i = 0
    while i < len(word):
        if word[i] == "%" and i + 1 < len(word):
            k = word[i + 1]
            out.append("%" if k == "%" else spec.get(k, "%" + k))
            i += 2
        else:
            out.append(word[i])
            i += 1
    return "".join(out)


def _substitute(word: str, env: Mapping[str, str]) -> str:
    """``${NAME}`` anywhere in a word becomes its value (empty when unset), ``$$`` becomes ``$``. A bare
    ``$NAME`` inside a longer word and shell forms like ``${NAME:-default}`` stay as written: systemd 252
    does not expand them in command lines (seen on the real-systemd tier)."""
    out: list[str] = []
    i = 0
    while i < len(word):
        if word.startswith("$$", i):
            out.append("$")
            i += 2
            continue
        if word.startswith("${", i):
            end = word.find("}", i + 2)
            if end > 0 and _NAME.match(word[i + 2:end]):
                out.append(env.get(word[i + 2:end], ""))
                i = end + 1
                continue
        out.append(word[i])
        i += 1
    return "".join(out)


def command_words(line: str, spec: Mapping[str, str]) -> list[str]:
    """One ``ExecStart=`` value (prefix characters removed) as systemd stores it: unquoted, specifiers
    expanded, ``$`` references still unexpanded (that happens at each start)."""
    plain: list[bool] = []
    ws = words(line, plain=plain)
    out: list[str] = []
    for w, bare in zip(ws, plain, strict=True):
        if w == ";" and bare:
            break  # a lone unquoted semicolon separates commands (a quoted ";" is an argument); the first one runs
        out.append(expand_specifiers(w, spec))
    return out


def expand_argv(stored: list[str], env: Mapping[str, str]) -> list[str]:
    """The argv the process gets: a whole-word ``$NAME`` becomes the value split at whitespace (quotes in
    the value are removed), ``${NAME}`` becomes exactly its value."""
    argv: list[str] = []
    for w in stored:
        if w.startswith("$") and len(w) > 1 and w[1] not in "{$" and _NAME.match(w[1:]):
            if w[1:] in env:
                argv.extend(words(env[w[1:]], cunescape=False))
            continue
        argv.append(_substitute(w, env))
    return argv


def environment_line(value: str, spec: Mapping[str, str]) -> dict[str, str] | None:
    """One ``Environment=`` value: items are words (quotes group), ``%`` specifiers are expanded, ``$`` is
    literal; an item that is not ``NAME=value`` with a valid name is ignored. None resets the list."""
    if not value.strip():
        return None
    env: dict[str, str] = {}
    for w in words(value):
        item = expand_specifiers(w, spec)
        name, eq, val = item.partition("=")
        if eq and _NAME.match(name):
            env[name] = val
    return env


def environment_file(text: str) -> dict[str, str]:
    """An ``EnvironmentFile=`` as systemd 252 reads it (its ``parse_env_file`` state machine):
    ``#``/``;`` comment lines, quotes only where a value starts, ``\\`` continuations; ``export NAME=``
    and other invalid names are ignored."""
    env: dict[str, str] = {}
    state = "pre_key"
    key: list[str] = []
    val: list[str] = []
    trail = -1  # where trailing whitespace of the unquoted value starts

    def push() -> None:
        k = "".join(key).rstrip()
        v = "".join(val[:trail] if trail >= 0 else val)
        if _NAME.match(k):
            env[k] = v

    for c in text + "\n":
        if state == "pre_key":
            if c in "#;":
                state = "comment"
            elif c not in _WS:
                state, key, val, trail = "key", [c], [], -1
        elif state == "comment":
            if c == "\\":
                state = "comment_escape"
            elif c == "\n":
                state = "pre_key"
        elif state == "comment_escape":
            state = "comment"
        elif state == "key":
            if c == "\n":
                state = "pre_key"  # a line without "=" is ignored
            elif c == "=":
                state = "pre_value"
            else:
                key.append(c)
        elif state == "pre_value":
            if c == "\n":
                push()
                state = "pre_key"
            elif c == "'":
                state = "single"
            elif c == '"':
                state = "double"
            elif c == "\\":
                state = "value_escape"
            elif c not in " \t\r":
                val.append(c)
                state = "value"
        elif state == "value":
            if c == "\n":
                push()
                state = "pre_key"
            elif c == "\\":
                trail = -1
                state = "value_escape"
            else:
                if c in " \t\r":
                    if trail < 0:
                        trail = len(val)
                else:
                    trail = -1
                val.append(c)
        elif state == "value_escape":
            if c != "\n":
                val.append(c)
            state = "value"
        elif state == "single":
            if c == "'":
                state = "pre_value"
            else:
                val.append(c)
        elif state == "double":
            if c == '"':
                state = "pre_value"
            elif c == "\\":
                state = "double_escape"
            else:
                val.append(c)
        elif state == "double_escape":
            if c in '"\\`$':
                val.append(c)
            elif c != "\n":
                val.extend(("\\", c))
            state = "double"
    return env


def _unescape_name(s: str) -> str:
    """Unit-name unescaping (``%I``, ``%P``, ``%J``): ``-`` is ``/``, ``\\xNN`` is that character."""
    s = s.replace("-", "/")
    return re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), s)


def name_specifiers(unit: str) -> dict[str, str]:
    """The specifiers systemd derives from a unit's name: ``%n %N %p %P %i %I %j %J``."""
    stem = unit.rsplit(".", 1)[0] if "." in unit else unit
    prefix, at, instance = stem.partition("@")
    last = prefix.rsplit("-", 1)[-1]
    spec = {"n": unit, "N": stem, "p": prefix, "P": _unescape_name(prefix), "j": last, "J": _unescape_name(last)}
    if at and instance:
        spec["i"] = instance
        spec["I"] = _unescape_name(instance)
    return spec
