"""The free-text scanner for ``name=value`` shapes: where a secret-named key's value starts and where it ends.

``NAME=value``, ``name: value``, ``"name": "value"``, ``'name': [...]``, ``Namespace(key=...)``, ``--flag v1 v2``
(up to the next flag) and ``Authorization: Bearer <token>``. Values are replaced in place, keeping every other
byte; a quoted value keeps its quotes, a bracketed one becomes a quoted marker.
"""

from __future__ import annotations

import re

from services.redaction.names import QREDACTED, REDACTED, is_secret_name, lazy_re, normalise_name

# Cheap pre-checks: text with none of these fragments (lower-cased) and none of the token prefixes cannot contain
# anything we redact. Written as tries, without IGNORECASE: ``re`` scans these about twice as fast as a flat
# alternation and several times faster than a case-insensitive one (python -m bench.redaction).
_FRAGS = (r"a(?:uth)|c(?:red|ookie)|dsn|key|p(?:ass|w|riv)|s(?:ecret|ig(?:n(?:ing|ature)|(?![a-z])))|token(?!iz)"
          r"|webhook")
HINT_LOW = re.compile(_FRAGS + r"|b(?:earer|asic)|://")
_FRAG_SEP = re.compile(r"(?:" + _FRAGS + r")[\w.\-]*\\?[\"']?(?:[ \t]*[=:]|[ \t]+)")
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")
_KEY_AT = re.compile(r"(?P<q>\\?[\"']?)(?P<k>-{0,2}[A-Za-z0-9_][A-Za-z0-9_.\-]*)(?P=q)"
                     r"(?P<sep>[ \t]*(?::=|=>|[=:])[ \t]*|[ \t]+)")
# A header as a tuple: ('x-api-key', '…'), (b'authorization', b'Bearer …'), as httpx and ASGI print them.
_TUPLE_ITEM = lazy_re(r"\(\s*b?(?P<q>['\"])(?P<k>[A-Za-z0-9_.\-]+)(?P=q)\s*,\s*(?P<v>b?(?P<vq>['\"]))")
# A value the scanner already replaced, used as a key ("[redacted] = B07y…"): what follows is as secret.
_AFTER_MARK = lazy_re(r"\[redacted\]['\"]?(?P<sep>[ \t]*(?::=|=>|=|:(?!//))[ \t]*)")
_AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "apikey", "negotiate", "hmac", "aws4-hmac-sha256"})
BEARER = re.compile(r"(?P<k>\b(?i:Bearer)[ \t]+|\bBasic[ \t]+)(?P<v>(?!\[redacted\])[A-Za-z0-9._~+/=\-]{3,})")
_CLOSE = {"[": "]", "{": "}", "(": ")"}
_COOKIE = re.compile(r"(?:^|_)COOKIES?$")
_COUNT_NAMES = frozenset({"TOKENS", "KEYS"})
_PLAIN_WORDS = frozenset({"None", "null", "True", "False", "true", "false", "NULL"})  # no secret, keep readable


def _key_start(low: str, i: int) -> int:
    """Where the identifier around ``low[i]`` starts, including an opening quote (``"``, ``'``, ``\\"``)."""
    while i > 0 and low[i - 1] in _IDENT_CHARS:
        i -= 1
    if i > 0 and low[i - 1] in "'\"":
        i -= 1
        if i > 0 and low[i - 1] == "\\":
            i -= 1
    return i


def redact_keyed(s: str, low: str) -> str:
    """``s`` with the value of every secret-named key replaced; ``low`` is ``s`` lower-cased."""
    if len(low) != len(s):  # non-ASCII text whose lower-casing changed its length: positions must agree
        low = "".join(c.lower() if len(c.lower()) == 1 else c for c in s)
    out: list[str] = []
    pos = 0
    for f in _FRAG_SEP.finditer(low):
        kstart = _key_start(low, f.start())
        if kstart < pos:
            continue
        m = _KEY_AT.match(s, kstart)
        outer = ""
        if m is None and s[kstart] in "'\"\\":  # "API_KEYS=a b": the quote opens the whole item, not the key
            outer = s[kstart:kstart + 2] if s[kstart] == "\\" else s[kstart]
            m = _KEY_AT.match(s, kstart + len(outer))
        if m is None:
            continue
        key, sep, q = m["k"], m["sep"], m["q"]
        is_flag = key.startswith("--")
        if not sep.strip() and not is_flag:
            continue  # "word value" is prose, not a key; only --flags take a space-separated value
        if is_flag and ":" in sep:
            continue  # "argument --api-key: expected one argument" names a flag, it does not set one
        if not is_secret_name(key):
            continue
        start = m.end()
        if start >= len(s) or s[start] in "\r\n" or s.startswith(REDACTED, start) or s.startswith(
                QREDACTED, start) or s.startswith(f"'{REDACTED}'", start) or s.startswith(f'\\"{REDACTED}', start):
            continue
        if not sep.strip() and s.startswith("-", start):
            continue  # "--api-key --port": a switch followed by the next flag
        query = m.start() > 0 and s[m.start() - 1] in "?&;" and not q
        end, kind = value_end(s, start, query)
        if kind == "word" and s[_skip_blanks(s, end):_skip_blanks(s, end) + 1] in ("=", ":") and \
                not s.startswith("://", _skip_blanks(s, end)):
            continue  # "credentials: aws_secret_access_key = …": the word is the next key, which goes on its own
        if outer and kind == "word" and sep.strip() == "=":
            close = _close_quote(s, start, outer)  # the value runs to the quote that closes the item
            if close >= 0:
                end = close
        if kind == "word" and _COOKIE.search(normalise_name(key)):
            end = _item_end(s, start, outer)  # "Cookie: a=1; b=2" is one value, to the end of the header
        if is_flag:
            end = _more_flag_values(s, end)
        elif kind == "word" and normalise_name(key).endswith(("AUTHORIZATION", "AUTH")) and \
                s[start:end].lower() in _AUTH_SCHEMES:
            end, _ = value_end(s, _skip_blanks(s, end), False)  # "Authorization: Bearer <token>"
        if end <= start or (kind == "word" and s[start:end] in _PLAIN_WORDS):
            continue
        if kind == "word" and s[start:end].replace(",", "").isdigit() and normalise_name(key) in _COUNT_NAMES:
            continue  # "Generated tokens: 128" is a count ({"tokens": [...]} stays secret)
        out.append(s[pos:start])
        out.append(_replacement(s, start, kind, q) + "\n" * s.count("\n", start, end))
        pos = end
    if not out:
        return s
    out.append(s[pos:])
    return "".join(out)


def _item_end(s: str, start: int, outer: str) -> int:
    """The end of a header's value: the quote that closes the item it is in, else the end of the line."""
    if outer:
        close = _close_quote(s, start, outer)
        if close >= 0:
            return close
    eol = s.find("\n", start)
    end = len(s) if eol < 0 else eol
    while end > start and s[end - 1] in " \t\r":
        end -= 1
    return end


def redact_tuples(s: str) -> str:
    """``('x-api-key', '…')`` and ``(b'cookie', b'…')``: a secret-named header's value in a tuple is replaced."""
    out: list[str] = []
    pos = 0
    for m in _TUPLE_ITEM().finditer(s):
        if m.start() < pos or not is_secret_name(m["k"]):
            continue
        vq = m["vq"]
        close = _close_quote(s, m.end(), vq)
        if close < 0 or s[m.end():close] == REDACTED:
            continue
        out += [s[pos:m.end()], REDACTED]
        pos = close
    if not out:
        return s
    out.append(s[pos:])
    return "".join(out)


def redact_after_marks(s: str) -> str:
    """``[redacted] = value``: a replaced value that stood where a key stands takes the value after it too."""
    out: list[str] = []
    pos = 0
    for m in _AFTER_MARK().finditer(s):
        start = m.end()
        if start < pos or start >= len(s) or s[start] in "\r\n" or s.startswith(REDACTED, start) or \
                s.startswith(QREDACTED, start) or s.startswith(f"'{REDACTED}'", start):
            continue
        if not m["sep"].strip() and s.startswith("-", start):
            continue
        end, kind = value_end(s, start, False)
        if end <= start:
            continue
        out += [s[pos:start], _replacement(s, start, kind, "")]
        pos = end
    if not out:
        return s
    out.append(s[pos:])
    return "".join(out)


def _replacement(s: str, start: int, kind: str, key_quote: str) -> str:
    if kind == "quoted":
        quote = s[start:start + 2] if s[start] == "\\" else s[start]
        return f"{quote}{REDACTED}{quote}"
    if kind == "struct" or key_quote:
        if key_quote.endswith('"'):
            return f'{key_quote}{REDACTED}{key_quote}'
        return f"'{REDACTED}'"
    return REDACTED


def _skip_blanks(s: str, i: int) -> int:
    while i < len(s) and s[i] in " \t":
        i += 1
    return i


def value_end(s: str, i: int, query: bool) -> tuple[int, str]:
    """Where the value starting at ``i`` ends, and its kind: "quoted", "struct" or "word"."""
    c = s[i]
    if c in "'\"" or (c == "\\" and s[i + 1:i + 2] in ("'", '"')):
        quote = s[i:i + 2] if c == "\\" else c
        eol = s.find("\n", i)
        eol = len(s) if eol < 0 else eol
        j = _close_quote(s, i + len(quote), quote)
        # A quoted value ends on its own line: an unclosed quote must not swallow the lines after it.
        return (j + len(quote) if 0 <= j < eol else eol), "quoted"
    if c in _CLOSE:
        j = _close_bracket(s, i)
        if j > 0:
            return j, "struct"
    j = i
    stops = " \t\r\n&#" if query else " \t\r\n"
    while j < len(s) and s[j] not in stops:
        j += 1
    # A trailing "," / ")" / "}" belongs to the surrounding repr or JSON, not to the value.
    while j > i + 1 and s[j - 1] in ",;)]}\"'":
        j -= 1
    return j, "word"


def _close_quote(s: str, i: int, quote: str) -> int:
    while True:
        j = s.find(quote, i)
        if j < 0:
            return -1
        backslashes = 0
        k = j - 1
        while k >= i and s[k] == "\\":
            backslashes += 1
            k -= 1
        if len(quote) == 2 or backslashes % 2 == 0:
            return j
        i = j + 1


def _close_bracket(s: str, i: int) -> int:
    """Index after the bracket matching ``s[i]`` (quotes respected), or -1 if it is not closed."""
    stack: list[str] = []
    j = i
    while j < len(s):
        c = s[j]
        if c in "'\"":
            k = _close_quote(s, j + 1, c)
            if k < 0:
                return -1
            j = k + 1
            continue
        if c in _CLOSE:
            stack.append(_CLOSE[c])
        elif c in ")]}":
            if not stack or stack.pop() != c:
                return -1
            if not stack:
                return j + 1
        j += 1
    return -1


def _more_flag_values(s: str, end: int) -> int:
    """``--api-key sk-abc sk-def --port 1``: every value of a secret flag up to the next ``-flag``."""
    while True:
        j = _skip_blanks(s, end)
        if j == end or j >= len(s) or s[j] in "\r\n-":
            return end
        nxt, _ = value_end(s, j, False)
        if nxt <= j:
            return end
        end = nxt


