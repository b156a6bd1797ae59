"""Redaction of structured values: JSON flag values (kept valid JSON), YAML text, parsed objects, and the literal
values found under secret-named keys at any depth (for :class:`services.redact.Redactor`)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

from services.redaction.names import QREDACTED, REDACTED, Secret, is_secret_name
from services.redaction.text import redact_patterns

_NOT_VALUES = frozenset({"true", "false", "null", "none", "yes", "no", "on", "off", REDACTED})


def collect_secret_values(obj: object, min_len: int = 6) -> list[str]:
    """Every literal value under a secret-named key at any depth of a JSON/YAML/dict structure.

    Lists' items and nested objects under a secret key are all collected; numbers as their text; booleans,
    null and values shorter than ``min_len`` are skipped so that "1" or "true" never wipe ordinary text.
    Strings that hold JSON (a flag value such as ``--kv-transfer-config``) are parsed and walked too.
    """
    out: dict[str, None] = {}
    _collect(obj, False, min_len, out, 0)
    return list(out)


def _collect(obj: object, under_secret: bool, min_len: int, out: dict[str, None], depth: int) -> None:
    if depth > 50:
        return
    if isinstance(obj, dict):
        for k, v in obj.items():
            _collect(v, under_secret or (isinstance(k, str) and is_secret_name(k)), min_len, out, depth + 1)
    elif isinstance(obj, list | tuple | set | frozenset):
        for v in obj:
            _collect(v, under_secret, min_len, out, depth + 1)
    elif isinstance(obj, bool) or obj is None:
        return
    elif isinstance(obj, int | float) and under_secret:
        text = str(obj)
        if len(text) >= min_len:
            out[text] = None
    elif isinstance(obj, Secret):
        if len(obj.reveal()) >= min_len:
            out[obj.reveal()] = None
    elif isinstance(obj, str):
        stripped = obj.strip()
        if stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]"):
            try:
                parsed: object = json.loads(stripped)
            except ValueError:
                parsed = None
            if isinstance(parsed, dict | list):
                _collect(parsed, under_secret, min_len, out, depth + 1)
                if not under_secret:
                    return
        if under_secret and len(stripped) >= min_len and stripped.lower() not in _NOT_VALUES:
            out[stripped] = None


def redact_value(name: str, value: str) -> str:
    """The value to show for ``name=value``: ``[redacted]`` for secret names, else patterns redacted."""
    if is_secret_name(name):
        return REDACTED
    return redact_json_or_text(value)


def redact_json_or_text(value: str) -> str:
    """Redact a value that may be JSON (``--kv-transfer-config``) or free text.

    JSON stays JSON: the value under a secret-named key at any depth is replaced whole by ``"[redacted]"``
    whatever its type, secret shapes inside other strings are redacted, and everything else keeps the
    bytes it was passed with. When nothing is secret the input is returned unchanged.
    """
    red = redact_json(value, redact_patterns)
    return redact_patterns(value) if red is None else red


def redact_json(value: str, text: Callable[[str], str]) -> str | None:
    """``value`` with secrets inside its JSON redacted (other bytes kept), or None if it is not JSON."""
    stripped = value.strip()
    if not (stripped[:1] in ("{", "[") and stripped[-1:] in ("}", "]")):
        return None
    try:
        json.loads(stripped)
    except ValueError:
        return None
    edits: list[tuple[int, int, str]] = []
    _json_walk(value, _skip_ws(value, 0), False, edits, text)
    if not edits:
        return value
    out: list[str] = []
    pos = 0
    for a, b, rep in edits:
        out += [value[pos:a], rep]
        pos = b
    out.append(value[pos:])
    return "".join(out)


_DECODER = json.JSONDecoder()
_WS = " \t\n\r"


def _skip_ws(s: str, i: int) -> int:
    while i < len(s) and s[i] in _WS:
        i += 1
    return i


def _json_walk(s: str, i: int, secret: bool, edits: list[tuple[int, int, str]], text: Callable[[str], str]) -> int:
    """Walk the (valid) JSON value at ``i``, recording replacements; returns the index after it.

    ``text`` redacts a string (shapes, and known values for :meth:`Redactor.text`); a number or a key it changes
    is replaced whole, so the result stays valid JSON.
    """
    c = s[i]
    if secret:
        end = _json_end(s, i)
        if s[i:end] != QREDACTED:
            edits.append((i, end, QREDACTED))
        return end
    if c == "{":
        i = _skip_ws(s, i + 1)
        if s[i] == "}":
            return i + 1
        while True:
            key, kend = json.decoder.scanstring(s, i + 1)  # type: ignore[attr-defined]
            red_key = text(key)
            if red_key != key:
                edits.append((i, kend, json.dumps(red_key, ensure_ascii=False)))
            i = _skip_ws(s, _skip_ws(s, kend) + 1)  # past ":"
            i = _skip_ws(s, _json_walk(s, i, is_secret_name(key), edits, text))
            if s[i] == "}":
                return i + 1
            i = _skip_ws(s, i + 1)  # past ","
    if c == "[":
        i = _skip_ws(s, i + 1)
        if s[i] == "]":
            return i + 1
        while True:
            i = _skip_ws(s, _json_walk(s, i, False, edits, text))
            if s[i] == "]":
                return i + 1
            i = _skip_ws(s, i + 1)
    if c == '"':
        raw, end = json.decoder.scanstring(s, i + 1)  # type: ignore[attr-defined]
        red = text(raw)
        if red != raw:
            edits.append((i, end, json.dumps(red, ensure_ascii=False)))
        return int(end)
    _, end = _DECODER.raw_decode(s, i)
    scalar = s[i:end]
    if c not in "tfn" and text(scalar) != scalar:  # a known secret number
        edits.append((i, end, QREDACTED))
    return int(end)


def _json_end(s: str, i: int) -> int:
    c = s[i]
    if c in "{[":
        depth = 0
        j = i
        while j < len(s):
            ch = s[j]
            if ch == '"':
                _, j = json.decoder.scanstring(s, j + 1)  # type: ignore[attr-defined]
                continue
            if ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        return len(s)
    _, end = _DECODER.raw_decode(s, i)
    return int(end)


def redact_obj(obj: object) -> object:
    """A copy of a JSON/YAML structure with every secret-named key's value replaced by ``"[redacted]"``."""
    if isinstance(obj, dict):
        return {k: (REDACTED if isinstance(k, str) and is_secret_name(k) else redact_obj(v)) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [redact_obj(v) for v in obj]
    if isinstance(obj, str):
        return redact_json_or_text(obj)
    return obj


_YAML_KEY = re.compile(r"^(?P<ind>[ \t]*(?:-[ \t]+)?)(?P<q>[\"']?)(?P<k>[^\s:\"'#][^:\"'#]*?)(?P=q)[ \t]*:(?:[ \t]+|$)")


_YAML_EXPLICIT = re.compile(r"^(?P<ind>[ \t]*)\?[ \t]+(?P<q>[\"']?)(?P<k>[^\"'#]*?)(?P=q)[ \t]*(?:#.*)?$")
_YAML_BLOCK = ("", "|", ">", "|-", ">-", "|+", ">+")


def redact_yaml_text(text: str) -> str:
    """Redact YAML text (a ``--config`` file) line by line; unchanged bytes when nothing is secret.

    A secret-named key's value, scalar or nested block (``key:`` followed by deeper lines, ``key: |``), is
    replaced by ``'[redacted]'``, for an explicit key (``? api-key`` then ``: value``) too. When the text parses,
    every value that YAML puts under a secret-named key is replaced wherever it is written, so a value given
    once with an anchor (``&k value``) and used under a secret key through its alias (``api-key: *k``) goes
    too. Every other line goes through :func:`redact_patterns`.
    """
    known = _yaml_secret_values(text)
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    skip_deeper: int | None = None
    explicit: int | None = None  # indent of a "? secret-key" line whose ": value" line comes next
    for line in lines:
        body = line.rstrip("\r\n")
        indent = len(body) - len(body.lstrip(" \t"))
        if skip_deeper is not None:
            if not body.strip() or indent > skip_deeper or (indent == skip_deeper and body.lstrip().startswith("- ")):
                continue
            skip_deeper = None
        if explicit is not None and indent == explicit and body.lstrip().startswith(":"):
            value = body.lstrip()[1:].strip()
            explicit = None
            if value in _YAML_BLOCK or value.startswith("#"):
                skip_deeper = indent
            out.append(f"{body[:indent]}: '{REDACTED}'{line[len(body):]}")
            continue
        e = _YAML_EXPLICIT.match(body)
        if e:
            explicit = indent if is_secret_name(e["k"]) else None
            out.append(line)
            continue
        m = _YAML_KEY.match(body)
        if m and is_secret_name(m["k"]):
            value = body[m.end():].strip()
            if value in _YAML_BLOCK or value.startswith("#"):
                skip_deeper = indent
            if value != f"'{REDACTED}'":
                out.append(f"{body[:m.end()].rstrip()} '{REDACTED}'{line[len(body):]}")
                continue
        out.append(redact_patterns(_replace_yaml_values(line, known) if known else line))
    return "".join(out)


def _yaml_secret_values(text: str) -> list[str]:
    """The scalars YAML puts under secret-named keys (aliases resolved), longest first; none if it does not parse."""
    import yaml  # only YAML text pays for PyYAML

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    return sorted(collect_secret_values(data, min_len=4), key=len, reverse=True)


def _replace_yaml_values(line: str, values: list[str]) -> str:
    for v in values:
        if v in line:
            line = re.sub(r"(?P<q>['\"]?)(?<![\w\-])" + re.escape(v) + r"(?![\w\-])(?P=q)", f"'{REDACTED}'", line)
    return line
