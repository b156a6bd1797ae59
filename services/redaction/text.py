"""Redaction of free text: one string (:func:`redact_patterns`) or journal lines (:func:`redact_lines`).

A string is read twice when it hides its shape: once as it is and once in its plain form (colour codes and
zero-width characters removed, non-breaking spaces made spaces, printable ``%XX`` escapes decoded). When the plain
form holds a secret, the plain form is what is shown, redacted; otherwise the string comes back byte for byte.

Across lines, :func:`redact_lines` (and :func:`redact_patterns` on a string of several lines) also replaces a
value that starts on the line after its secret-named key (``{"api_key":`` then the value), the rest of a PEM key,
and pydantic's ``input_value=…`` under a secret field's name (the field is named on the line above).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from services.redaction import gitleaks
from services.redaction.keyed import (
    BEARER,
    HINT_LOW,
    redact_after_marks,
    redact_keyed,
    redact_tuples,
    value_end,
)
from services.redaction.names import QREDACTED, REDACTED, is_secret_name, lazy_re
from services.redaction.shapes import (
    CMD_PASSWORD,
    SHAPE_HINT,
    TOKEN_SHAPES,
    URL_USER,
    URL_USERINFO,
    cmd_password,
    keep_lines,
    user_only,
    userinfo,
)

# Terminal escape sequences (CSI, OSC, two-byte) and characters that take no room (zero-width, soft hyphen).
_INVISIBLE = lazy_re(
    "\x1b\\[[0-?]*[ -/]*[@-~]|\x1b\\][^\x07\x1b]*(?:\x07|\x1b\\\\)?|\x1b[@-Z\\\\-_]"
    "|[\u00ad\u200b-\u200f\u2060-\u2064\ufeff]"
)
_ODD_SPACES = lazy_re("[\u00a0\u1680\u2000-\u200a\u202f\u205f\u3000]")
_PRINTABLE_ESCAPE = lazy_re(r"%(?:[2-6][0-9A-Fa-f]|7[0-9A-Ea-e])")


# What can hide a shape (see plain_form), found in one search.
_HIDING = re.compile("[\x1b\u00a0\u00ad\u1680\u2000-\u200f\u202f\u205f\u2060-\u2064\u3000\ufeff]|%[2-7][0-9A-Fa-f]")
_CMD_PROGRAMS = ("mysql", "mariadb", "sshpass", "login", "redis-cli")  # the clients of shapes.CMD_PASSWORD
_RULES: list[gitleaks.RuleSet] = []  # gitleaks' rules once loaded (a list: no global statement needed)


def _load_rules() -> gitleaks.RuleSet:
    _RULES.append(gitleaks.rules())
    return _RULES[0]


def plain_form(s: str) -> str | None:
    """``s`` without what hides a shape (see the module), or None when there is nothing to take away."""
    t = s
    if "\x1b" in t or not t.isascii():
        t = _ODD_SPACES().sub(" ", _INVISIBLE().sub("", t))
    if "%" in t:
        for _ in range(2):  # twice: a value encoded twice (%253D) is as readable to a browser
            u = _PRINTABLE_ESCAPE().sub(lambda m: chr(int(m.group()[1:], 16)), t)
            if u == t:
                break
            t = u
    return None if t == s else t


def redact_patterns(s: str, known: Callable[[str], str] | None = None) -> str:
    """Redact secret-shaped substrings of free text, keeping the rest byte for byte.

    Covers ``NAME=value`` / ``name: value`` / ``"name": "value"`` / ``'name': [...]`` / ``Namespace(key=...)``
    for secret names (quoted values whole), ``--secret-flag v1 v2`` up to the next flag, auth headers, cookies,
    header tuples, ``user:password@`` and ``TOKEN@`` in URLs, query-string secrets, passwords on printed command
    lines, Slack webhooks, PEM private keys, gitleaks' provider token shapes and inferbot's own. ``known``
    replaces literal values first (:class:`services.redact.Redactor`), in each form of the string.
    """
    if not s:
        return s
    if (s.isascii() and "\x1b" not in s and "%" not in s) or _HIDING.search(s) is None:
        return _one_form(known(s) if known else s)  # nothing can hide a shape: one reading (most text)
    plain = plain_form(s)
    if plain is not None:
        red = _one_form(known(plain) if known else plain)
        if red != plain:
            return red
    return _one_form(known(s) if known else s)


def _one_form(s: str) -> str:
    low = s.lower()
    rules = _RULES[0] if _RULES else _load_rules()
    if len(s) >= rules.min_len:
        found = rules.spans(s, low)
        if found:
            s = _cut(s, found)
            low = s.lower()
    words = HINT_LOW.search(low) is not None
    shapes = SHAPE_HINT.search(s) is not None
    url = "://" in s
    cmd = ("-p" in s or "-a" in s) and any(p in low for p in _CMD_PROGRAMS)
    tuples = "('" in s or '("' in s or "(b'" in s or '(b"' in s
    if not (words or shapes or url or cmd or tuples or REDACTED in s or "'input'" in s):
        return s
    if shapes:
        s = TOKEN_SHAPES.sub(keep_lines, s)
        low = s.lower()
    if url:
        s = URL_USER().sub(user_only, URL_USERINFO.sub(userinfo, s))
        low = s.lower()
    if cmd:
        s = CMD_PASSWORD().sub(cmd_password, s)
        low = s.lower()
    if words:
        s = redact_keyed(s, low)
        if "bearer" in low or "basic" in low:
            s = BEARER.sub(lambda m: f"{m['k']}{REDACTED}", s)
    if tuples:
        s = redact_tuples(s)
    if "'input'" in s:
        s = _pydantic_input_dicts(s)
    if REDACTED in s:
        s = redact_after_marks(s)
    if "\n" in s:
        s = "\n".join(_across_lines(s.split("\n")))
    return s


_WORD_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_TOKEN_CHARS = _WORD_CHARS | frozenset("+/=")  # base64's too, after the start (before it: a key's "=")


def _cut(s: str, spans: list[tuple[int, int, str]]) -> str:
    """``s`` with each span replaced, grown over the token characters around it: a rule that knows a token's
    exact length must not leave the end of a longer one ("ghp_" and 37 characters) on show."""
    out: list[str] = []
    pos = 0
    for a, b, _ in sorted(spans):
        while a > pos and s[a - 1] in _WORD_CHARS:
            a -= 1
        while b < len(s) and s[b] in _TOKEN_CHARS:
            b += 1
        if b <= pos:
            continue
        a = max(a, pos)
        out += [s[pos:a], REDACTED + "\n" * s.count("\n", a, b)]
        pos = b
    out.append(s[pos:])
    return "".join(out)


def redact_lines(lines: list[str], known: Callable[[str], str] | None = None) -> list[str]:
    """Redact journal lines one by one, and what runs over several lines as a whole (see the module).

    Returns as many lines as it was given; each clean line comes back unchanged.
    """
    out: list[str] = []
    in_pem = False
    for line in lines:
        if in_pem:
            out.append(REDACTED)
            in_pem = "-----END" not in line
            continue
        if "PRIVATE KEY" in line and _PEM_OPEN().search(line):
            in_pem = True
        out.append(redact_patterns(line, known))
    return _across_lines(out)


_PEM_OPEN = lazy_re(r"-----BEGIN[A-Z ]*PRIVATE KEY( BLOCK)?-----(?!.*-----END)")
# A secret-named key with its separator and nothing after it: the value is on the next line.
_DANGLING = lazy_re(r"(?P<q>\\?[\"']?)(?P<k>-{0,2}[A-Za-z0-9_][\w.\-]*)(?P=q)[ \t]*(?::=|=>|[=:])[ \t]*$")
# pydantic's ValidationError text: the field's location alone on a line, then its errors indented under it.
_PYDANTIC_LOC = lazy_re(r"[A-Za-z_][\w.\-\[\]]*")
_INPUT_VALUE = lazy_re(r"\binput_value=")
_INPUT_DICT = lazy_re(r"'loc': \((?P<loc>[^)]*)\)(?P<mid>[^{}]*?)'input': ")


# What journalctl (short, short-iso, short-precise) and vLLM's process tag put before a message.
_LINE_PREFIX = lazy_re(
    r"(?:(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d(?:\.\d+)?"
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d{2}:?\d{2}|Z)?)"
    r" \S+ [^\s:\[]+(?:\[\d+\])?: )?(?:\(\w+ pid=\d+\) )?"
)


_ENDS_KEY = ("=", ":", ">")


def _across_lines(lines: list[str]) -> list[str]:
    """The second pass over (already redacted) lines: values that start on the line after their key, and
    pydantic's ``input_value`` of a secret field. A journal line's prefix (time, host, process) is left alone."""
    if not any(x.rstrip()[-1:] in _ENDS_KEY or "input_value=" in x for x in lines):
        return lines  # no line ends with a key, no pydantic input: nothing runs over a line (most logs)
    out = list(lines)
    depth = 0  # brackets still open in a value that runs over several lines
    pending = False  # the previous line ended with a secret-named key and its separator
    secret_field = False  # inside pydantic's errors of a secret-named field
    for i, whole in enumerate(out):
        cut = _LINE_PREFIX().match(whole)
        head, line = (whole[:cut.end()], whole[cut.end():]) if cut else ("", whole)
        if depth > 0:
            depth += _balance(line)
            out[i] = head + REDACTED
            continue
        if pending and line.strip():
            pending = False
            j = len(line) - len(line.lstrip(" \t"))
            if not line.startswith((REDACTED, QREDACTED, f"'{REDACTED}'"), j):
                end, kind = value_end(line, j, False)
                if kind == "word" and line[j] in "[{(":  # a structure that goes on below
                    depth = _balance(line[j:])
                    end = len(line)
                line = line[:j] + (line[j] + REDACTED + line[j] if kind == "quoted" else REDACTED) + line[end:]
        if _PYDANTIC_LOC().fullmatch(line):
            secret_field = is_secret_name(line.replace("[", ".").replace("]", ""))
        elif line[:1] in (" ", "\t"):
            if secret_field and "input_value=" in line:
                line = _after(line, _INPUT_VALUE())
        else:
            secret_field = False
        if line.rstrip()[-1:] in _ENDS_KEY:  # cheap first: a key with nothing after it ends so
            m = _DANGLING().search(line)
            pending = m is not None and is_secret_name(m["k"])
        out[i] = head + line
    return out


def _balance(s: str) -> int:
    return sum(s.count(c) for c in "[{(") - sum(s.count(c) for c in "]})")


def _after(line: str, marker: re.Pattern[str]) -> str:
    m = marker.search(line)
    if m is None or line.startswith(REDACTED, m.end()) or line.startswith(f"'{REDACTED}'", m.end()):
        return line
    end, kind = value_end(line, m.end(), False)
    rep = line[m.end()] + REDACTED + line[m.end()] if kind == "quoted" else REDACTED
    return line[:m.end()] + rep + line[end:]


def _pydantic_input_dicts(s: str) -> str:
    """``errors()`` as printed: ``{'loc': ('api_key',), …, 'input': '…'}`` loses the input of a secret field."""
    out: list[str] = []
    pos = 0
    for m in _INPUT_DICT().finditer(s):
        names = [p.strip(" '\"") for p in m["loc"].split(",")]
        if m.start() < pos or not any(n and is_secret_name(n) for n in names):
            continue
        start = m.end()
        if start >= len(s) or s.startswith((REDACTED, f"'{REDACTED}'"), start):
            continue
        end, kind = value_end(s, start, False)
        out += [s[pos:start], "'" + REDACTED + "'" if kind != "word" else REDACTED]
        pos = end
    if not out:
        return s
    out.append(s[pos:])
    return "".join(out)
