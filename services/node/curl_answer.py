"""What a fixed ``curl`` template printed on the node, read back: the smoke completion's and the chat's.

Both templates print ``<MARK> rc=<curl's exit>`` and then, base64 on one line, the body followed by a line
``<http_code> <time_total>`` (curl's ``-w``): binary-safe over SSH, and a body that contains the mark cannot
fake it.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass

# curl's exit codes a person understands (``man curl``, EXIT CODES); 28 (timeout) is each caller's own.
CURL_EXITS = {7: "connection refused", 6: "host not found", 52: "empty reply", 56: "connection reset"}


@dataclass(frozen=True)
class CurlAnswer:
    """curl's exit code, and when it answered, the body, the HTTP status and the time it took."""

    rc: int
    body: str
    status: int | None
    took_s: float | None


def read_curl_answer(stdout: str, mark: str) -> CurlAnswer | None:
    """The answer after ``mark`` in ``stdout`` (None: the template did not run)."""
    lines = stdout.splitlines()
    at = next((i for i, line in enumerate(lines) if line.startswith(mark + " ")), None)
    if at is None:
        return None
    rc_text = lines[at][len(mark) + 1:].removeprefix("rc=").strip()
    rc = int(rc_text) if rc_text.isdigit() else -1
    raw = lines[at + 1] if at + 1 < len(lines) else ""
    try:
        decoded = base64.b64decode(raw.strip(), validate=False).decode("utf-8", "replace")
    except ValueError:
        decoded = ""
    body, _, tail = decoded.rpartition("\n")
    parts = tail.split()
    status = int(parts[0]) if parts and parts[0].isdigit() else None
    try:
        took = float(parts[1]) if len(parts) > 1 else None
    except ValueError:
        took = None
    return CurlAnswer(rc, body, status, took)


def unreachable_text(rc: int) -> str:
    """Why curl could not reach the server, in words."""
    return CURL_EXITS.get(rc) or f"curl exit {rc}"


def error_text(body: str) -> str:
    """vLLM's error message from either error shape (``{"error": {"message": …}}`` or ``{"message": …}``)."""
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            kind = err.get("type")
            return f"{kind}: {err['message']}" if kind else str(err["message"])
        if isinstance(err, str) and err:
            return err
        if data.get("message"):
            kind = data.get("type")
            return f"{kind}: {data['message']}" if kind else str(data["message"])
    return body.strip()
