"""Redaction: secret values never reach Slack, the terminal, JSON or logs.

Redaction happens where node output is parsed, before anything is stored, rendered or logged.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable

REDACTED = "[redacted]"

_SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|PRIVATE|SIGNING", re.IGNORECASE)
# Names that contain a secret-looking word but hold no secret (paths, switches, sizes).
_NOT_SECRET_NAMES = re.compile(
    r"^(ssl[-_]keyfile|ssl[-_]certfile|ssl[-_]ca[-_]certs|.*[-_]key[-_]?(file|path)|"
    r".*_KEYS?_DIR|kv[-_]cache.*|prefix[-_]caching[-_]hash[-_]algo|.*tokeni[sz]er.*|max[-_].*tokens.*|"
    r".*[-_]tokens|.*_TOKENS|enable[-_]auth.*|disable[-_]auth.*)$",
    re.IGNORECASE,
)
SECRET_FLAGS = frozenset({"api-key", "hf-token"})
# Tokens with a recognisable shape are redacted wherever they appear in free text.
_TOKEN_SHAPES = re.compile(
    r"\b(hf_[A-Za-z0-9]{8,}|sk-[A-Za-z0-9_\-]{8,}|xox[abposr]-[A-Za-z0-9\-]{8,}|xapp-[A-Za-z0-9\-]{8,}|"
    r"gh[pousr]_[A-Za-z0-9]{16,}|AKIA[0-9A-Z]{16}|glpat-[A-Za-z0-9_\-]{16,})\b"
)
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^/\s:@'\"]+):(?P<pw>[^@\s/'\"]+)@")
_QUERY_SECRET = re.compile(
    r"(?P<k>[?&](?:[A-Za-z0-9_\-]*(?:token|key|secret|password|signature|sig|credential)[A-Za-z0-9_\-]*))="
    r"(?P<v>[^&\s'\"]+)",
    re.IGNORECASE,
)
_ASSIGN = re.compile(
    r"(?P<k>\b[A-Za-z_][A-Za-z0-9_]*(?:TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIALS?|AUTH)[A-Za-z0-9_]*)"
    r"(?P<sep>=)(?P<q>['\"]?)(?P<v>[^\s'\"]+)(?P=q)",
    re.IGNORECASE,
)
_FLAG_SECRET = re.compile(
    r"(?P<k>--(?:api[-_]key|hf[-_]token|[A-Za-z0-9\-_]*(?:token|secret|password)[A-Za-z0-9\-_]*))"
    r"(?P<sep>[= ]+)(?P<q>['\"]?)(?P<v>(?!--)[^\s'\"]+)(?P=q)",
    re.IGNORECASE,
)
_PYREPR_SECRET = re.compile(
    r"(?P<k>['\"](?:api_key|hf_token|[a-z_]*(?:token|secret|password|api_key)[a-z_]*)['\"]\s*:\s*)"
    r"(?P<v>\[[^\]]*\]|'[^']*'|\"[^\"]*\")",
    re.IGNORECASE,
)
_BEARER = re.compile(r"(?P<k>\b(?:Bearer|Basic|token)\s+)(?P<v>[A-Za-z0-9._~+/=\-]{8,})", re.IGNORECASE)


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True for environment variable or flag names whose values are secrets (``HF_TOKEN``, ``*_KEY``…)."""
    bare = name.lstrip("-")
    if bare.replace("_", "-").lower() in SECRET_FLAGS:
        return True
    if _NOT_SECRET_NAMES.match(bare):
        return False
    return bool(_SECRET_NAME.search(bare))


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


class Redactor:
    """Replaces secrets in text: known secret values first, then anything secret-shaped."""

    def __init__(self, known: Iterable[str] = ()) -> None:
        # Longest first, so a secret that contains another is replaced whole.
        self._known = sorted({k for k in known if k and len(k) >= 4 and k != REDACTED}, key=len, reverse=True)

    def add(self, *values: str) -> None:
        """Remember more secret values (e.g. read from a unit on the node)."""
        merged = set(self._known) | {v for v in values if v and len(v) >= 4 and v != REDACTED}
        self._known = sorted(merged, key=len, reverse=True)

    def text(self, s: str) -> str:
        """Redact a free-text string in place, keeping everything that is not secret."""
        for k in self._known:
            if k in s:
                s = s.replace(k, REDACTED)
        return redact_patterns(s)


def redact_patterns(s: str) -> str:
    """Redact secret-shaped substrings (``user:pass@`` in URLs, ``X_TOKEN=…``, ``--api-key …``, tokens)."""
    s = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:{REDACTED}@", s)
    s = _QUERY_SECRET.sub(lambda m: f"{m['k']}={REDACTED}", s)
    s = _ASSIGN.sub(lambda m: m.group(0) if _is_plain(m) else f"{m['k']}{m['sep']}{m['q']}{REDACTED}{m['q']}", s)
    s = _FLAG_SECRET.sub(lambda m: f"{m['k']}{m['sep']}{m['q']}{REDACTED}{m['q']}", s)
    s = _PYREPR_SECRET.sub(lambda m: f"{m['k']}'{REDACTED}'", s)
    s = _BEARER.sub(lambda m: f"{m['k']}{REDACTED}", s)
    s = _TOKEN_SHAPES.sub(REDACTED, s)
    return s


def _is_plain(m: re.Match[str]) -> bool:
    return not is_secret_name(m["k"]) or m["v"] == REDACTED


def redact_value(name: str, value: str) -> str:
    """The value to show for ``name=value``: ``[redacted]`` for secret names, else patterns redacted."""
    if is_secret_name(name):
        return REDACTED
    return redact_json_or_text(value)


def redact_json_or_text(value: str) -> str:
    """Redact a value that may be JSON (``--kv-transfer-config``): secret keys inside it are replaced."""
    stripped = value.strip()
    if stripped.startswith("{") and stripped.endswith("}"):
        try:
            obj = json.loads(stripped)
        except ValueError:
            return redact_patterns(value)
        return json.dumps(_redact_obj(obj), separators=(", ", ": "))
    return redact_patterns(value)


def _redact_obj(obj: object) -> object:
    if isinstance(obj, dict):
        return {
            k: (REDACTED if isinstance(k, str) and is_secret_name(k) and not isinstance(v, dict | list | bool)
                else _redact_obj(v))
            for k, v in obj.items()
        }
    if isinstance(obj, list):
        return [_redact_obj(v) for v in obj]
    if isinstance(obj, str):
        return redact_patterns(obj)
    return obj
