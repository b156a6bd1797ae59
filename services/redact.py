"""Redaction: secret values never reach Slack, the terminal, JSON or logs.

Redaction happens where node output is parsed, before anything is stored, rendered or logged. Three layers:

* names: :func:`is_secret_name` decides for env vars, flags and JSON/YAML/dict keys (any spelling:
  ``HF_TOKEN``, ``hf-token``, ``hfToken``); a secret name's whole value is replaced, whatever its type;
* known values: :class:`Redactor` replaces every literal secret value seen on the node wherever it appears
  (:func:`collect_secret_values` gathers them from structures); a short one only as a whole word;
* shapes in free text: :func:`redact_patterns` (gitleaks' provider token rules, inferbot's own token shapes,
  ``name=value``, ``name: value``, quoted and Python-repr forms, ``--flag v1 v2``, auth headers, cookies, header
  tuples, URL credentials, command-line passwords, PEM blocks), also when colour codes, odd spaces or
  ``%``-encoding hide them; :func:`redact_lines` adds what spans journal lines.

The parts live in :mod:`services.redaction`; why gitleaks' rules and not detect-secrets is in the README
("Secrets") and ``python -m bench.redaction`` measures it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator

from services.redaction.names import REDACTED, SECRET_FLAGS, Secret, is_secret_name, normalise_name
from services.redaction.structured import (
    collect_secret_values,
    redact_json,
    redact_json_or_text,
    redact_obj,
    redact_value,
    redact_yaml_text,
)
from services.redaction.text import redact_lines, redact_patterns

__all__ = [
    "MIN_KNOWN_LEN", "REDACTED", "SECRET_FLAGS", "Redactor", "Secret", "collect_secret_values", "is_secret_name",
    "iter_secret_env", "normalise_name", "redact_json_or_text", "redact_lines", "redact_obj", "redact_patterns",
    "redact_value", "redact_yaml_text",
]


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
            red = redact_json(s, self._plain)
            if red is not None:
                return red
        return self._plain(s)

    def lines(self, lines: list[str]) -> list[str]:
        """Redact journal lines: known values anywhere, then :func:`redact_lines` (what spans lines, whole)."""
        return redact_lines(lines, self._known_only if self._known else None)

    def _known_only(self, s: str) -> str:
        for k in self._known:
            if k in s:
                if len(k) >= WHOLE_WORD_BELOW or not (_WORD.match(k[0]) and _WORD.match(k[-1])):
                    s = s.replace(k, REDACTED)
                else:
                    s = _whole_word(k).sub(REDACTED, s)
        return s

    def _plain(self, s: str) -> str:
        return redact_patterns(s, self._known_only if self._known else None)


# A short value ("vllm", "test1234") is replaced only as a whole word, so that it never takes a piece out of a file
# name, a path or a flag ("vllm_config.py", "pytest"); a longer one is replaced wherever it appears.
WHOLE_WORD_BELOW = 12
_WORD = re.compile(r"\w")


@functools.lru_cache(maxsize=1024)
def _whole_word(value: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(value) + r"(?!\w)")


def _knowable(v: str) -> bool:
    return isinstance(v, str) and len(v.strip()) >= MIN_KNOWN_LEN and v != REDACTED


def iter_secret_env(env: dict[str, str]) -> Iterator[str]:
    """The values of secret-named variables of an environment (for :meth:`Redactor.add`)."""
    for k, v in env.items():
        if is_secret_name(k) and v:
            yield v
