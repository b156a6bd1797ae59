"""Structured logs: one JSON line per event, secrets redacted, no message texts at INFO."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from bot.terminal import json_shown
from services.redact import REDACTED, is_secret_name, redact_obj, redact_patterns

_STD = set(vars(logging.LogRecord("x", 0, "x", 0, "x", None, None))) | {"message", "asctime", "taskName"}


class JsonFormatter(logging.Formatter):
    """Formats records as one JSON object per line; every string goes through redaction."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, object] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": redact_patterns(record.getMessage()),
        }
        for k, v in vars(record).items():
            if k not in _STD and not k.startswith("_"):
                out[k] = _clean(k, v)
        if record.exc_info:
            out["exc"] = redact_patterns(self.formatException(record.exc_info))
        if record.stack_info:
            out["stack"] = redact_patterns(record.stack_info)
        # One line a terminal shows and never obeys: JSON escapes C0; C1, DEL and bidi controls too (json_shown).
        return json_shown(json.dumps(out, default=lambda o: redact_patterns(str(o)), ensure_ascii=False))


def _clean(key: str, v: object) -> object:
    """An ``extra=`` value as logged: secret-named fields whole, secret keys at any depth, secret shapes in text."""
    if is_secret_name(key) and v is not None and not isinstance(v, bool):
        return REDACTED
    if isinstance(v, str):
        return redact_patterns(v)
    if isinstance(v, bool | int | float) or v is None:
        return v
    if isinstance(v, dict | list | tuple):
        return redact_obj(v)
    return redact_patterns(str(v))


def setup_logging(level: str = "INFO", stream: object = None) -> None:
    """Configure the root logger once; quiet the libraries that would log message bodies."""
    handler = logging.StreamHandler(stream or sys.stderr)  # type: ignore[arg-type]
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Bolt logs the whole request body (the message text) on a bad signature at INFO; asyncssh
    # logs every channel at INFO. Neither belongs in an ops log.
    for name in ("slack_bolt", "slack_sdk", "asyncssh", "aiohttp.access", "apscheduler"):
        logging.getLogger(name).setLevel(logging.WARNING)
