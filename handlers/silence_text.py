"""The words of a silence request: ``silence kimi 2h planned driver update`` → duration and reason.

Kept apart from :mod:`handlers.silence` so the router can use it without importing the store.
"""

from __future__ import annotations

import re

from services.redact import redact_patterns

MAX_REASON = 200
# "2h", "90 min", "1 day": the duration of a silence, and where its reason begins.
DURATION = re.compile(r"\b(\d{1,4}(?:\.\d+)?)\s*(m|mins?|minutes?|h|hrs?|hours?|d|days?|w|weeks?)\b", re.IGNORECASE)
_UNIT_S = {"m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


def split_silence(text: str) -> tuple[str, float | None, str]:
    """``"silence kimi 2h planned driver update"`` → (``"silence kimi"``, 7200.0, ``"planned driver update"``).

    The words after the duration are the reason (never service names); without a duration the whole
    text is the head and the reason is empty.
    """
    m = DURATION.search(text)
    if m is None:
        return text, None, ""
    seconds = float(m.group(1)) * _UNIT_S[m.group(2)[0].lower()]
    reason = text[m.end():].strip(" \t\n-—:,.;")
    reason = re.sub(r"^(?:for|because|due\s+to|reason)\b:?\s*", "", reason, flags=re.IGNORECASE)
    return text[:m.start()], seconds, clean_reason(reason)


def clean_reason(reason: str) -> str:
    """A reason as it is stored and shown: one line, bounded, secrets redacted (it is user text)."""
    # Slack markup (<!channel>, <@U…>, links) out: the bot repeats the reason, and must not ping anyone with it.
    plain = re.sub(r"<[^>]*>|@(?:channel|here|everyone)\b", " ", reason).replace("<", " ").replace(">", " ")
    return redact_patterns(" ".join(plain.split()))[:MAX_REASON]
