"""Redaction of free text: one string (:func:`redact_patterns`) or journal lines (:func:`redact_lines`)."""

from __future__ import annotations

import re

from services.redaction.keyed import BEARER, HINT_LOW, redact_keyed
from services.redaction.names import REDACTED
from services.redaction.shapes import SHAPE_HINT, TOKEN_SHAPES, URL_USERINFO, keep_lines, userinfo


def redact_patterns(s: str) -> str:
    """Redact secret-shaped substrings of free text, keeping the rest byte for byte.

    Covers ``NAME=value`` / ``name: value`` / ``"name": "value"`` / ``'name': [...]`` / ``Namespace(key=...)``
    for secret names (quoted values whole), ``--secret-flag v1 v2`` up to the next flag, auth headers,
    ``user:password@`` in URLs, query-string secrets, Slack webhooks, PEM private keys and provider tokens.
    """
    if not s:
        return s
    low = s.lower()
    words = HINT_LOW.search(low) is not None
    shapes = SHAPE_HINT.search(s) is not None
    if not words and not shapes:
        return s
    if shapes:
        s = TOKEN_SHAPES.sub(keep_lines, s)
        low = s.lower()
    if "://" in s:
        s = URL_USERINFO.sub(userinfo, s)
        low = s.lower()
    if words:
        s = redact_keyed(s, low)
        if "bearer" in low or "basic" in low:
            s = BEARER.sub(lambda m: f"{m['k']}{REDACTED}", s)
    return s


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

