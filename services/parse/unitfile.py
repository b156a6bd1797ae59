"""Parsers for unit files as ``systemctl cat`` prints them, systemd command lines and environment files.

systemd's quoting rules are not POSIX shell rules (C escapes in single quotes, ``%`` specifiers, ``$VAR``
only as a whole word, quotes removed mid-word by systemd 252), so the splitting here is written by hand
instead of using ``shlex``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from services.models import UnitFile

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BRACED_OR_DOLLAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
# "# /etc/systemd/system/x.service" headers that systemctl cat puts before each file.
_CAT_HEADER = re.compile(
    r"^# (/\S+\.(?:service|conf|socket|timer|target|mount|path|slice|scope|automount|swap|device))\s*$"
)
_SIMPLE_ESCAPES = {
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
    "\\": "\\", '"': '"', "'": "'", "s": " ", ";": ";",
}  # fmt: skip
_EXEC_PREFIX_CHARS = "-@:+!|"


def _cunescape(s: str, i: int) -> tuple[str, int]:
    """Decode the C escape starting at ``s[i] == '\\\\'``; returns (text, index after it)."""
    if i + 1 >= len(s):
        return "\\", i + 1
    c = s[i + 1]
    if c in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[c], i + 2
    for lead, width, base in (("x", 2, 16), ("u", 4, 16), ("U", 8, 16)):
        if c == lead:
            digits = s[i + 2 : i + 2 + width]
            if len(digits) == width and all(ch in "0123456789abcdefABCDEF" for ch in digits):
                return chr(int(digits, base)), i + 2 + width
            return "\\" + c, i + 2
    if c in "01234567":
        digits = s[i + 1 : i + 4]
        if len(digits) == 3 and all(ch in "01234567" for ch in digits):
            return chr(int(digits, 8)), i + 4
    # systemd rejects unknown escapes; keeping them literally is the friendlier reading for a report.
    return "\\" + c, i + 2


def _specifier(s: str, i: int, specifiers: Mapping[str, str] | None) -> tuple[str, int]:
    """Resolve ``%X`` at ``s[i]``; unknown specifiers stay literal so the user sees what was written."""
    if i + 1 >= len(s):
        return "%", i + 1
    c = s[i + 1]
    if c == "%":
        return "%", i + 2
    if specifiers is not None and c in specifiers:
        return specifiers[c], i + 2
    return "%" + c, i + 2


def _extract_words(text: str, specifiers: Mapping[str, str] | None,
                   spans: list[tuple[int, int]] | None = None) -> list[tuple[str, bool]]:
    """systemd's extract_first_word(EXTRACT_UNQUOTE|EXTRACT_CUNESCAPE) plus ``%`` specifiers.

    Returns (word, was_quoted) pairs; ``was_quoted`` lets the caller tell a lone ``;`` command separator
    from a quoted ``";"`` argument. ``spans``, when given, receives each word's (start, end) in ``text``.
    """
    words: list[tuple[str, bool]] = []
    buf: list[str] = []
    in_word = False
    quoted = False
    quote: str | None = None
    start = 0
    i = 0
    n = len(text)

    def begin() -> None:
        nonlocal in_word, start
        if not in_word:
            in_word, start = True, i

    while i < n:
        c = text[i]
        if c == "\\":
            begin()
            piece, i = _cunescape(text, i)
            buf.append(piece)
            continue
        if c == "%" and specifiers is not None:
            begin()
            piece, i = _specifier(text, i, specifiers)
            buf.append(piece)
            continue
        if quote:
            if c == quote:
                quote = None
            else:
                buf.append(c)
        elif c in "\"'":
            # systemd 252 also strips quotes that open in the middle of a word (--x='{"a":1}').
            begin()
            quote = c
            quoted = True
        elif c in " \t\n\r":
            if in_word:
                words.append(("".join(buf), quoted))
                if spans is not None:
                    spans.append((start, i))
                buf, in_word, quoted = [], False, False
        else:
            begin()
            buf.append(c)
        i += 1
    if in_word:
        words.append(("".join(buf), quoted))
        if spans is not None:
            spans.append((start, n))
    return words


def command_word_spans(line: str, specifiers: Mapping[str, str]) -> list[tuple[str, int, int]]:
    """The words of an ``ExecStart=`` value as systemd splits them (quotes and C escapes removed, ``%``
    specifiers resolved, ``$VAR`` left as written), each with its (start, end) in ``line``: a writer that
    keeps a word keeps its original text, quoting, specifiers and variables included."""
    spans: list[tuple[int, int]] = []
    words = _extract_words(line, {k.lstrip("%"): v for k, v in specifiers.items()}, spans)
    return [(w, a, b) for (w, _), (a, b) in zip(words, spans, strict=True)]


def _replace_env(word: str, env: Mapping[str, str]) -> str:
    """``${VAR}`` anywhere in a word becomes its value (empty when unset); ``$$`` becomes ``$``."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), "")

    return _BRACED_OR_DOLLAR.sub(sub, word)


def split_command(line: str, env: Mapping[str, str], specifiers: Mapping[str, str]) -> list[str]:
    """Split an ``ExecStart=`` value into argv the way systemd does (systemd.syntax(7), systemd.service(5)).

    Quotes and C escapes are removed, ``%`` specifiers resolved from ``specifiers`` (keys are the letter:
    ``{"i": "8004"}``), ``$VAR`` as a whole word expands to the value split on whitespace (none when
    unset), ``${VAR}`` expands in place to exactly one word, ``$$`` is a literal ``$``. Leading exec prefixes
    (``-@:+!``) are dropped; with ``@`` the second word is argv[0], so the path itself is dropped. Only the
    first command is returned when several are separated by a lone ``;``.
    """
    spec = {k.lstrip("%"): v for k, v in specifiers.items()}
    words = _extract_words(line, spec)
    first_cmd: list[str] = []
    for word, was_quoted in words:
        if word == ";" and not was_quoted:
            break
        first_cmd.append(word)
    if not first_cmd:
        return []
    head = first_cmd[0]
    prefix = ""
    while head and head[0] in _EXEC_PREFIX_CHARS:
        prefix += head[0]
        head = head[1:]
    first_cmd[0] = head
    if "@" in prefix:
        first_cmd = first_cmd[1:]
    elif not head:
        first_cmd = first_cmd[1:]
    if ":" in prefix:
        return first_cmd
    argv: list[str] = []
    for word in first_cmd:
        if word.startswith("$") and not word.startswith(("${", "$$")) and _ENV_NAME.match(word[1:]):
            argv.extend(_split_env_value(env.get(word[1:], "")))
        else:
            argv.append(_replace_env(word, env))
    return argv


def _split_env_value(value: str) -> list[str]:
    # systemd splits a whole-word $VAR with EXTRACT_RELAX|EXTRACT_UNQUOTE: quotes group, no C escapes.
    words: list[str] = []
    buf: list[str] = []
    in_word = False
    quote: str | None = None
    for c in value:
        if quote:
            if c == quote:
                quote = None
            else:
                buf.append(c)
        elif c in "\"'":
            quote = c
            in_word = True
        elif c in " \t\n\r":
            if in_word:
                words.append("".join(buf))
                buf, in_word = [], False
        else:
            buf.append(c)
            in_word = True
    if in_word:
        words.append("".join(buf))
    return words


def _unit_unescape(s: str) -> str:
    """systemd unit-name unescaping for ``%I``/``%P``: ``\\xNN`` is a byte, ``-`` is ``/``."""
    out = re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)), s.replace("-", "/"))
    return out


def unit_specifiers(unit_name: str, instance: str | None = None) -> dict[str, str]:
    """The name-derived specifiers for ``unit_name`` (``%n %N %p %P %i %I %j %J``).

    Host- and user-dependent ones (``%H %h %u``) are not known without asking the node, so they are left
    out and stay literal unless the caller adds them.
    """
    spec: dict[str, str] = {}
    if unit_name:
        spec["n"] = unit_name
        stem = unit_name.rsplit(".", 1)[0] if "." in unit_name else unit_name
        spec["N"] = stem
        prefix, at, inst = stem.partition("@")
        spec["p"] = prefix
        spec["P"] = _unit_unescape(prefix)
        spec["j"] = prefix.rsplit("-", 1)[-1]
        spec["J"] = _unit_unescape(spec["j"])
        if at and instance is None and inst:
            instance = inst
    if instance is not None:
        spec["i"] = instance
        spec["I"] = _unit_unescape(instance)
    return spec


def parse_environment_assignments(value: str, specifiers: Mapping[str, str]) -> dict[str, str] | None:
    """One ``Environment=`` line as a dict; None for the empty assignment that resets the list.

    Items are quoted as in command lines, ``%`` specifiers are expanded, ``$`` is literal; items that are
    not ``NAME=value`` with a valid name are ignored as systemd does.
    """
    if not value.strip():
        return None
    env: dict[str, str] = {}
    for word, _ in _extract_words(value, specifiers):
        name, eq, val = word.partition("=")
        if eq and _ENV_NAME.match(name):
            env[name] = val
    return env


def logical_lines(text: str) -> Iterable[tuple[str | None, str]]:
    """Yield (file header path or None, logical line) with continuations joined and comments dropped."""
    pending: list[str] | None = None
    for raw in text.splitlines():
        header = _CAT_HEADER.match(raw)
        if header and pending is None:
            yield header.group(1), ""
            continue
        stripped = raw.strip()
        if stripped.startswith(("#", ";")):
            # Comment lines inside a continuation are skipped, the continuation goes on.
            continue
        if pending is None and not stripped:
            continue
        if stripped.endswith("\\"):
            # The backslash-newline becomes one space (systemd.syntax(7)).
            (pending if pending is not None else (pending := [])).append(stripped[:-1] + " ")
            continue
        if pending is not None:
            pending.append(stripped)
            yield None, "".join(pending).strip()
            pending = None
        else:
            yield None, stripped
    if pending is not None:
        yield None, "".join(pending).strip()


def parse_unit_cat(
    text: str,
    instance: str | None = None,
    unit_name: str = "",
    *,
    extra_specifiers: Mapping[str, str] | None = None,
) -> UnitFile:
    """Parse ``systemctl cat UNIT`` output (fragment then drop-ins) into the effective settings.

    Later files override earlier ones like systemd merges them: an empty ``ExecStart=``/``Environment=``/
    ``EnvironmentFile=``/``ExecStartPre=`` resets the list. ``exec_start`` is split with the unit's own
    ``Environment=``; call ``expand_exec_start`` with EnvironmentFile values merged to get what the process
    really sees. ``unit_name`` defaults to the first file's name; ``vllm@8004.service`` gives ``%i=8004``.
    """
    unit = _UnitSettings(instance, unit_name, extra_specifiers)
    section = ""
    for header, line in logical_lines(text):
        if header is not None:
            unit.file(header)
            section = ""
        elif line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        else:
            key, eq, value = line.partition("=")
            if eq:
                unit.assign(section, key.strip(), value.strip())
    return unit.result()


class _UnitSettings:
    """The settings of a unit as its files are read in order, merged the way systemd merges them."""

    def __init__(self, instance: str | None, unit_name: str, extra_specifiers: Mapping[str, str] | None) -> None:
        self.instance = instance
        self.unit_name = unit_name
        self.extra_specifiers = extra_specifiers
        self.paths: list[str] = []
        self.exec_lines: list[str] = []
        self.pre_lines: list[str] = []
        self.environment: dict[str, str] = {}
        self.env_files: list[tuple[str, bool]] = []
        self.scalars: dict[str, str] = {}
        self.spec: dict[str, str] = {}
        self._refresh_spec()

    def _refresh_spec(self) -> None:
        self.spec.clear()
        self.spec.update(unit_specifiers(self.unit_name, self.instance))
        if self.extra_specifiers:
            self.spec.update({k.lstrip("%"): v for k, v in self.extra_specifiers.items()})

    def file(self, path: str) -> None:
        """The next file begins (``# /etc/systemd/system/x.service``); the first names the unit."""
        self.paths.append(path)
        if not self.unit_name and len(self.paths) == 1:
            self.unit_name = path.rsplit("/", 1)[-1]
            # systemctl cat vllm@8004.service shows the template file vllm@.service.
            if self.instance is not None and "@." in self.unit_name:
                self.unit_name = self.unit_name.replace("@.", f"@{self.instance}.", 1)
            self._refresh_spec()

    def assign(self, section: str, key: str, value: str) -> None:
        """One ``Key=value`` line of ``[section]``."""
        if section == "Unit" and key == "Description":
            self.scalars["description"] = _expand_specifiers(value, self.spec)
        if section != "Service":
            return
        if key == "ExecStart":
            _append_or_reset(self.exec_lines, value)
        elif key == "ExecStartPre":
            _append_or_reset(self.pre_lines, value)
        elif key == "Environment":
            assigned = parse_environment_assignments(value, self.spec)
            if assigned is None:
                self.environment.clear()
            else:
                self.environment.update(assigned)
        elif key == "EnvironmentFile":
            if not value:
                self.env_files.clear()
            else:
                optional = value.startswith("-")
                self.env_files.append((_expand_specifiers(value[1:] if optional else value, self.spec), optional))
        elif key in ("User", "WorkingDirectory", "Restart"):
            self.scalars[key] = _expand_specifiers(value, self.spec)

    def result(self) -> UnitFile:
        """The effective settings once every file was read."""
        environment, spec = self.environment, self.spec
        return UnitFile(
            paths=self.paths,
            exec_start=split_command(self.exec_lines[0], environment, spec) if self.exec_lines else [],
            exec_start_pre=[split_command(p, environment, spec) for p in self.pre_lines],
            environment=environment,
            environment_files=self.env_files,
            description=self.scalars.get("description", ""),
            user=self.scalars.get("User", ""),
            working_directory=self.scalars.get("WorkingDirectory", ""),
            restart=self.scalars.get("Restart", ""),
            exec_start_lines=self.exec_lines,
            specifiers=spec,
        )


def _append_or_reset(lines: list[str], value: str) -> None:
    # An empty assignment resets the list (systemd.unit(5)): drop-ins use it to replace a command.
    if value:
        lines.append(value)
    else:
        lines.clear()


def _expand_specifiers(value: str, spec: Mapping[str, str]) -> str:
    out: list[str] = []
    i = 0
    while i < len(value):
        if value[i] == "%":
            piece, i = _specifier(value, i, spec)
            out.append(piece)
        else:
            out.append(value[i])
            i += 1
    return "".join(out)


def merge_environment(unit: UnitFile, file_envs: Iterable[Mapping[str, str]]) -> dict[str, str]:
    """The environment the service process gets: ``Environment=`` first, then each EnvironmentFile in order.

    Files override ``Environment=`` (verified on systemd 252), whatever their position in the unit.
    """
    env = dict(unit.environment)
    for file_env in file_envs:
        env.update(file_env)
    return env


def expand_exec_start(
    unit: UnitFile, raw_line: str | None = None, env: Mapping[str, str] | None = None
) -> list[str]:
    """Re-split the effective ExecStart (or ``raw_line``) with a full environment (``merge_environment``)."""
    line = raw_line if raw_line is not None else (unit.exec_start_lines[0] if unit.exec_start_lines else None)
    if line is None:
        return []
    return split_command(line, unit.environment if env is None else env, unit.specifiers)


def parse_env_file(text: str) -> dict[str, str]:
    """Parse an ``EnvironmentFile=`` (systemd.exec(5)) into a dict; later assignments win.

    Follows systemd's own state machine (``load_env_file``): comments, quotes, escapes and ``\\``
    continuations. ``export NAME=value`` is accepted too although systemd would ignore that line, because
    the same files are often sourced by shells and the intent is clear.
    """
    env: dict[str, str] = {}
    i, n = 0, len(text)
    while i < n:
        # Skip leading whitespace (including blank lines).
        while i < n and text[i] in " \t\r\n":
            i += 1
        if i >= n:
            break
        if text[i] in "#;":
            while i < n and text[i] != "\n":
                # A backslash at the end of a comment line continues the comment.
                i += 2 if text[i] == "\\" else 1
            continue
        key_start = i
        while i < n and text[i] not in "=\n":
            i += 1
        key = text[key_start:i].strip()
        if i >= n or text[i] == "\n":
            continue  # a line without "=" is ignored
        i += 1  # the "="
        value, i = _read_env_value(text, i)
        if key.startswith("export ") or key.startswith("export\t"):
            key = key[len("export") :].strip()
        if _ENV_NAME.match(key):
            env[key] = value
    return env


def _read_env_value(text: str, i: int) -> tuple[str, int]:
    n = len(text)
    buf: list[str] = []
    # Index in buf after the last character that must survive trailing-whitespace trimming.
    keep = 0
    while i < n and text[i] in " \t":
        i += 1
    while i < n:
        c = text[i]
        if c == "\n":
            i += 1
            break
        if c == "\\":
            if i + 1 < n and text[i + 1] == "\n":
                i += 2  # continuation: the escaped newline disappears
                continue
            if i + 1 < n:
                buf.append(text[i + 1])
                keep = len(buf)
                i += 2
                continue
            i += 1
            continue
        if c == "'" and not buf:
            end = text.find("'", i + 1)
            end = n if end < 0 else end
            buf.append(text[i + 1 : end])
            keep = len(buf)
            i = end + 1
            continue
        if c == '"' and not buf:
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n:
                    nxt = text[i + 1]
                    if nxt in '"\\`$':
                        buf.append(nxt)
                    elif nxt != "\n":
                        buf.append("\\" + nxt)
                    i += 2
                    continue
                buf.append(text[i])
                i += 1
            i += 1
            keep = len(buf)
            continue
        buf.append(c)
        if c not in " \t\r":
            keep = len(buf)
        i += 1
    return "".join(buf[:keep]), i


def parse_docker_env_file(text: str) -> dict[str, str | None]:
    """Parse a ``docker run --env-file`` file: ``NAME=value`` taken literally (no quote removal).

    ``NAME`` alone means "copy from the host environment", given here as None. Lines starting with ``#``
    and blank lines are ignored; leading whitespace is trimmed, trailing whitespace is part of the value,
    as in docker's own reader.
    """
    env: dict[str, str | None] = {}
    for raw in text.splitlines():
        line = raw.lstrip()
        if not line or line.startswith("#"):
            continue
        name, eq, value = line.partition("=")
        name = name.lstrip()
        if not name or any(ch.isspace() for ch in name):
            continue  # docker refuses these lines; skipping keeps the rest readable
        env[name] = value if eq else None
    return env
