"""Secret names (which env vars, flags and keys hold a secret, in any spelling), the marker that replaces a secret,
and :class:`Secret`, a value that never prints."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable

REDACTED = "[redacted]"
QREDACTED = json.dumps(REDACTED)

# Secret words inside a normalised (upper snake case) name.
_SECRET_NAME = re.compile(
    r"TOKEN|KEY|SECRET|PASS|CREDENTIAL|AUTH|PRIVATE|SIGNING|SIGNATURE|WEBHOOK|(?:^|_)(?:PW|PWD|DSN|CREDS|SIG)(?:_|$)"
    r"|(?:^|_)(?:SET_)?COOKIES?$"
)
# A source file's name ("auth.py" in a log line's "[auth.py:88]") is never a secret's name, whatever it says.
_SOURCE_FILE = re.compile(r"[\w.\-]+\.(?:py[cdiwx]?|go|rs|c|cc|cpp|cxx|h|hh|hpp|cu|cuh|js|mjs|ts|java|kt|rb|sh|so|lua)")
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
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def lazy_re(pattern: str, flags: int = 0) -> Callable[[], re.Pattern[str]]:
    """A regex compiled on its first use: what only unusual text needs costs a cold start nothing."""
    return functools.cache(lambda: re.compile(pattern, flags))


def normalise_name(name: str) -> str:
    """A name in one spelling, upper snake case: ``--hf-token``, ``hfToken``, ``HF_TOKEN`` → ``HF_TOKEN``."""
    bare = name.strip().lstrip("-").strip("\"'")
    return re.sub(r"[-.\s]+", "_", _CAMEL.sub("_", bare)).upper()


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """True for env var, flag or key names whose values are secrets (``HF_TOKEN``, ``apiKey``, ``DB_PASS``…)."""
    if _SOURCE_FILE.fullmatch(name.strip("\"'")):
        return False
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

