"""Redaction: secret values never reach Slack, the terminal, JSON or logs.

Redaction happens where node output is parsed, before anything is stored, rendered or logged. Three layers:

* names: :func:`is_secret_name` decides for env vars, flags and JSON/YAML/dict keys (any spelling:
  ``HF_TOKEN``, ``hf-token``, ``hfToken``); a secret name's whole value is replaced, whatever its type;
* known values: :class:`Redactor` replaces every literal secret value seen on the node wherever it appears
  (:func:`collect_secret_values` gathers them from structures);
* shapes in free text: :func:`redact_patterns` (``name=value``, ``name: value``, quoted and Python-repr
  forms, ``--flag v1 v2``, auth headers, URL credentials, PEM blocks and provider token shapes).

The token shapes are a hand-kept list rather than ``detect-secrets``: ``python -m bench.redaction`` measured
its ``scan_line`` at ~200x and even its bare plugins at ~30x the cost of :func:`redact_patterns` on 200 vLLM
journal lines (both far over the ~3 ms a question may spend per node), its named detectors miss shapes we need
(``hf_``, ``nvapi-``, ``dapi``, ``sk-ant-``/``sk-proj-``, ``github_pat_``, Google), and its entropy detectors
flag ordinary words, which in-place redaction cannot use.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator

REDACTED = "[redacted]"
_QREDACTED = json.dumps(REDACTED)

# Secret words inside a normalised (upper snake case) name.
_SECRET_NAME = re.compile(
    r"TOKEN|KEY|SECRET|PASS|CREDENTIAL|AUTH|PRIVATE|SIGNING|SIGNATURE|WEBHOOK|(?:^|_)(?:PW|PWD|DSN|CREDS|SIG)(?:_|$)"
)
# Names that contain a secret-looking word but hold no secret (paths, switches, sizes, token counts).
_NOT_SECRET_NAMES = re.compile(
    r"SSL_KEYFILE|SSL_CERTFILE|SSL_CA_CERTS|.*_KEYFILE|.*_(?:FILE|PATH|DIR|FILENAME)S?|"
    r"KV_CACHE.*|PREFIX_CACHING_HASH_ALGO|.*TOKENI[SZ]ER.*|"
    r"(?:.*_)?(?:MAX|MIN|NUM|BATCHED|PREFILL|LOOKAHEAD|SPECULATIVE|SPECIAL|PROMPT|STOP|NEW|BOS|EOS|PAD|UNK|"
    r"TOTAL|OUTPUT|INPUT|GENERATED|CACHED|DRAFT|IMAGE|VISION|AUDIO|VIDEO)_(?:.*_)?TOKENS?(?:_.*)?|"
    r"(?:.*_)?TOKENS?_(?:IDS?|THRESHOLD|BUDGET|AS_.*|DETAILS|PER_.*|COUNT|LIMIT|LEN|USAGE)(?:_.*)?|"
    r"ENABLE_AUTH.*|DISABLE_AUTH.*|(?:.*_)?AUTHOR(?:S|_.*)?|"
    r"(?:.*_)?PASS_CONFIG|.*PASSES.*|.*PASSED.*|.*PASSING.*|.*PASSTHROUGH.*|.*BYPASS.*|.*COMPASS.*"
)
SECRET_FLAGS = frozenset({"api-key", "hf-token"})
# Cheap pre-checks: text with none of these fragments (lower-cased) and none of the token prefixes cannot contain
# anything we redact. Written as tries, without IGNORECASE: ``re`` scans these about twice as fast as a flat
# alternation and several times faster than a case-insensitive one (python -m bench.redaction).
_FRAGS = r"a(?:uth)|cred|dsn|key|p(?:ass|w|riv)|s(?:ecret|ig(?:n(?:ing|ature)|(?![a-z])))|token(?!iz)|webhook"
_HINT_LOW = re.compile(_FRAGS + r"|b(?:earer|asic)|://")
_SHAPE_HINT = re.compile(
    r"A(?:KIA|SIA|GPA|IDA|ROA|IPA|NPA|NVA|BIA|CCA|Iza)|g(?:h[pousr]_|ithub_pat_|lpat-)|x(?:ox|app-)|hf_|sk-|"
    r"nvapi-|dapi|ya29\.|eyJ|PRIVATE KEY|hooks\.slack|discord"
)
_FRAG_SEP = re.compile(r"(?:" + _FRAGS + r")[\w.\-]*\\?[\"']?(?:[ \t]*[=:]|[ \t]+)")
_IDENT_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.-")
# Provider token shapes, PEM private keys and Slack webhooks: replaced wherever they appear.
_TOKEN_SHAPES = re.compile(
    r"-----BEGIN[A-Z ]*PRIVATE KEY( BLOCK)?-----.*?(?:-----END[A-Z ]*PRIVATE KEY( BLOCK)?-----|\Z)"
    r"|https?://hooks\.slack\.com/(?:services|workflows|triggers)/[^\s'\"<>]+"
    r"|https?://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[^\s'\"<>]+"
    r"|\b(?:"
    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[0-9A-Z]{12,}\b"
    r"|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|glpat-[A-Za-z0-9_\-]{16,}"
    r"|xox[abposre]-[A-Za-z0-9\-]{8,}|xapp-[A-Za-z0-9\-]{8,}"
    r"|hf_[A-Za-z0-9]{20,}"
    r"|sk-(?:ant-|proj-)?[A-Za-z0-9_\-]{8,}"
    r"|nvapi-[A-Za-z0-9_\-]{16,}"
    r"|dapi[0-9a-f]{20,}(?:-\d+)?"
    r"|AIza[0-9A-Za-z_\-]{30,}|ya29\.[0-9A-Za-z_\-]{16,}"
    r"|eyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*"
    r")",
    re.DOTALL,
)
# user:password@ in a URL; the password runs to the LAST "@" of the URL (it may contain "@", "/", ":").
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s/:@'\"]*):(?P<pw>[^\s'\"]*)@")
# A key at a known start, with its separator: NAME=, NAME:, "name":, 'name':, --flag (space or =).
_KEY_AT = re.compile(r"(?P<q>\\?[\"']?)(?P<k>-{0,2}[A-Za-z0-9_][A-Za-z0-9_.\-]*)(?P=q)(?P<sep>[ \t]*[=:][ \t]*|[ \t]+)")
_AUTH_SCHEMES = frozenset({"bearer", "basic", "token", "digest", "apikey", "negotiate", "hmac", "aws4-hmac-sha256"})
_BEARER = re.compile(r"(?P<k>\b(?i:Bearer)[ \t]+|\bBasic[ \t]+)(?P<v>(?!\[redacted\])[A-Za-z0-9._~+/=\-]{3,})")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_CLOSE = {"[": "]", "{": "}", "(": ")"}
_COUNT_NAMES = frozenset({"TOKENS", "KEYS"})
_PLAIN_WORDS = frozenset({"None", "null", "True", "False", "true", "false", "NULL"})  # no secret, keep readable


def normalise_name(name: str) -> str:
    """A name in one spelling, upper snake case: ``--hf-token``, ``hfToken``, ``HF_TOKEN`` → ``HF_TOKEN``."""
    bare = name.strip().lstrip("-").strip("\"'")
    return re.sub(r"[-.\s]+", "_", _CAMEL.sub("_", bare)).upper()


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True for env var, flag or key names whose values are secrets (``HF_TOKEN``, ``apiKey``, ``DB_PASS``…)."""
    norm = normalise_name(name)
    if norm.replace("_", "-").lower() in SECRET_FLAGS:
        return True
    if _NOT_SECRET_NAMES.fullmatch(norm):
        return False
    return bool(_SECRET_NAME.search(norm))


class Secret:
    """A secret value: ``str()`` and ``repr()`` never show it; ``reveal()`` does, for the one place it is used."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The real value, for handing to the library that needs it; never log or render it."""
        return self._value

    def __str__(self) -> str:
        return REDACTED

    def __repr__(self) -> str:
        return f"Secret({REDACTED})"

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


MIN_KNOWN_LEN = 4  # shorter literal values ("1", "yes") would wipe ordinary text


class Redactor:
    """Replaces secrets in text: known secret values first, then anything secret-shaped."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        self._known = sorted({k for k in known if _knowable(k)}, key=len, reverse=True)

    def add(self, *values: str) -> None:
        """Remember more secret values (e.g. read from a unit on the node)."""
        merged = set(self._known) | {v for v in values if _knowable(v)}
        self._known = sorted(merged, key=len, reverse=True)

    def add_from(self, obj: object) -> None:
        """Remember every value under a secret-named key of a JSON/YAML/dict structure (see collect_secret_values)."""
        self.add(*collect_secret_values(obj))

    @property
    def known_count(self) -> int:
        """How many literal secret values are remembered (never the values)."""
        return len(self._known)

    def text(self, s: str) -> str:
        """Redact a free-text string in place, keeping everything that is not secret; JSON text stays valid JSON."""
        if self._known and s.lstrip()[:1] in ("{", "["):
            red = _redact_json(s, self._plain)
            if red is not None:
                return red
        return self._plain(s)

    def lines(self, lines: list[str]) -> list[str]:
        """Redact journal lines: known values anywhere, then :func:`redact_lines` (multi-line PEM blocks whole)."""
        if not self._known:
            return redact_lines(lines)
        return redact_lines([self._known_only(x) for x in lines])

    def _known_only(self, s: str) -> str:
        for k in self._known:
            if k in s:
                s = s.replace(k, REDACTED)
        return s

    def _plain(self, s: str) -> str:
        return redact_patterns(self._known_only(s))


def _knowable(v: str) -> bool:
    return isinstance(v, str) and len(v.strip()) >= MIN_KNOWN_LEN and v != REDACTED


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


def redact_patterns(s: str) -> str:
    """Redact secret-shaped substrings of free text, keeping the rest byte for byte.

    Covers ``NAME=value`` / ``name: value`` / ``"name": "value"`` / ``'name': [...]`` / ``Namespace(key=...)``
    for secret names (quoted values whole), ``--secret-flag v1 v2`` up to the next flag, auth headers,
    ``user:password@`` in URLs, query-string secrets, Slack webhooks, PEM private keys and provider tokens.
    """
    if not s:
        return s
    low = s.lower()
    words = _HINT_LOW.search(low) is not None
    shapes = _SHAPE_HINT.search(s) is not None
    if not words and not shapes:
        return s
    if shapes:
        s = _TOKEN_SHAPES.sub(_keep_lines, s)
        low = s.lower()
    if "://" in s:
        s = _URL_USERINFO.sub(_userinfo, s)
        low = s.lower()
    if words:
        s = _redact_keyed(s, low)
        if "bearer" in low or "basic" in low:
            s = _BEARER.sub(lambda m: f"{m['k']}{REDACTED}", s)
    return s


def _keep_lines(m: re.Match[str]) -> str:
    # A PEM block over several journal lines becomes as many lines, so line-by-line output keeps its shape.
    return "\n".join([REDACTED] * (m.group(0).count("\n") + 1)) if "\n" in m.group(0) else REDACTED


def redact_lines(lines: list[str]) -> list[str]:
    """Redact journal lines one by one, and a PEM private key spread over several lines as a whole.

    Returns as many lines as it was given; each clean line comes back unchanged.
    """
    out: list[str] = []
    in_pem = False
    for line in lines:
        if in_pem:
            out.append(REDACTED)
            in_pem = "-----END" not in line
            continue
        if "PRIVATE KEY" in line and _PEM_OPEN.search(line):
            in_pem = True
        out.append(redact_patterns(line))
    return out


_PEM_OPEN = re.compile(r"-----BEGIN[A-Z ]*PRIVATE KEY( BLOCK)?-----(?!.*-----END)")


def _userinfo(m: re.Match[str]) -> str:
    return f"{m['scheme']}{m['user']}:{REDACTED}@" if m["pw"] != REDACTED else m.group(0)


def _key_start(low: str, i: int) -> int:
    """Where the identifier around ``low[i]`` starts, including an opening quote (``"``, ``'``, ``\\"``)."""
    while i > 0 and low[i - 1] in _IDENT_CHARS:
        i -= 1
    if i > 0 and low[i - 1] in "'\"":
        i -= 1
        if i > 0 and low[i - 1] == "\\":
            i -= 1
    return i


def _redact_keyed(s: str, low: str) -> str:
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
        if not is_secret_name(key):
            continue
        start = m.end()
        if start >= len(s) or s[start] in "\r\n" or s.startswith(REDACTED, start) or s.startswith(
                _QREDACTED, start) or s.startswith(f"'{REDACTED}'", start) or s.startswith(f'\\"{REDACTED}', start):
            continue
        if not sep.strip() and s.startswith("-", start):
            continue  # "--api-key --port": a switch followed by the next flag
        query = m.start() > 0 and s[m.start() - 1] in "?&;" and not q
        end, kind = _value_end(s, start, query)
        if outer and kind == "word" and sep.strip() == "=":
            close = _close_quote(s, start, outer)  # the value runs to the quote that closes the item
            if close >= 0:
                end = close
        if is_flag:
            end = _more_flag_values(s, end)
        elif kind == "word" and normalise_name(key).endswith(("AUTHORIZATION", "AUTH")) and \
                s[start:end].lower() in _AUTH_SCHEMES:
            end, _ = _value_end(s, _skip_blanks(s, end), False)  # "Authorization: Bearer <token>"
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


def _value_end(s: str, i: int, query: bool) -> tuple[int, str]:
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
        nxt, _ = _value_end(s, j, False)
        if nxt <= j:
            return end
        end = nxt


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
    red = _redact_json(value, redact_patterns)
    return redact_patterns(value) if red is None else red


def _redact_json(value: str, text: Callable[[str], str]) -> str | None:
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
        if s[i:end] != _QREDACTED:
            edits.append((i, end, _QREDACTED))
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
        edits.append((i, end, _QREDACTED))
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


def redact_yaml_text(text: str) -> str:
    """Redact YAML text (a ``--config`` file) line by line; unchanged bytes when nothing is secret.

    A secret-named key's value, scalar or nested block (``key:`` followed by deeper lines, ``key: |``), is
    replaced by ``'[redacted]'``; every other line goes through :func:`redact_patterns`.
    """
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    skip_deeper: int | None = None
    for line in lines:
        body = line.rstrip("\r\n")
        indent = len(body) - len(body.lstrip(" \t"))
        if skip_deeper is not None:
            if not body.strip() or indent > skip_deeper or (indent == skip_deeper and body.lstrip().startswith("- ")):
                continue
            skip_deeper = None
        m = _YAML_KEY.match(body)
        if m and is_secret_name(m["k"]):
            value = body[m.end():].strip()
            if value in ("", "|", ">", "|-", ">-", "|+", ">+") or value.startswith("#"):
                skip_deeper = indent
            if value != f"'{REDACTED}'":
                out.append(f"{body[:m.end()].rstrip()} '{REDACTED}'{line[len(body):]}")
                continue
        out.append(redact_patterns(line))
    return "".join(out)


def iter_secret_env(env: dict[str, str]) -> Iterator[str]:
    """The values of secret-named variables of an environment (for :meth:`Redactor.add`)."""
    for k, v in env.items():
        if is_secret_name(k) and v:
            yield v
