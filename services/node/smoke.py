"""The smoke completion: one tiny ``/v1/completions`` request sent from the node before a load is called ready.

``/health`` only says the API process is up and the engine not flagged dead; a server can answer it and
still fail every request. One fixed remote template asks for a single token at temperature 0, with the
model name the server runs under; the API key travels on stdin into a shell variable and from there into
curl's header reader (``-H @-``), never on a command line. The answer is parsed here into a
:class:`SmokeResult`, whose error text is redacted before it leaves this module.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Literal

from config.models import API_URL_RE, Node, Service
from services.models import Model
from services.node.curl_answer import error_text, read_curl_answer, unreachable_text
from services.node.probe import remote_command
from services.node.ssh import NodePool, NodeUnreachable
from services.redact import Redactor

SmokeOutcome = Literal["ok", "failed", "skipped", "unreachable"]
MARK = "@@inferbot-smoke@@"
MAX_TOKENS = 1  # the time to the whole answer is the time to the first token
PROMPT = "Hello"
# A model name from the running flags goes into the JSON body (shlex-quoted); only names of this shape are
# sent at all, so nothing that looks like shell or JSON syntax can reach the node.
MODEL_RE = re.compile(r"^[A-Za-z0-9._/:@+-]{1,256}\Z")
ERROR_MAX = 300

_SCRIPT = r"""set -u
IFS= read -r K || K=''
if [ -n "$K" ]; then
  o=$(printf 'Authorization: Bearer %s\n' "$K" | curl -s --connect-timeout "$T" --max-time "$T" -H @- \
      -H 'Content-Type: application/json' --data-binary "$B" -w '\n%{http_code} %{time_total}' \
      "$U/v1/completions" 2>/dev/null); r=$?
else
  o=$(curl -s --connect-timeout "$T" --max-time "$T" -H 'Content-Type: application/json' --data-binary "$B" \
      -w '\n%{http_code} %{time_total}' "$U/v1/completions" 2>/dev/null); r=$?
fi
echo "$M rc=$r"; printf '%s' "$o" | base64 -w0; echo
"""


class SmokeResult(Model):
    """What the smoke completion showed. ``detail`` is redacted; ``ttft_s`` is set when it answered."""

    outcome: SmokeOutcome
    ttft_s: float | None = None
    status: int | None = None
    detail: str = ""


def completion_body(model: str) -> str:
    """The fixed request body: one token of a fixed prompt, temperature 0."""
    return json.dumps({"model": model, "prompt": PROMPT, "max_tokens": MAX_TOKENS, "temperature": 0})


def build_smoke_script(url: str, model: str, timeout_s: float) -> str:
    """The remote script (values validated here, each shlex-quoted); the key comes on stdin."""
    if not API_URL_RE.match(url):
        raise ValueError(f"refusing api_url {url!r}")
    if not MODEL_RE.match(model):
        raise ValueError("refusing a model name with unusual characters")
    head = f"M={shlex.quote(MARK)}; U={shlex.quote(url.rstrip('/'))}; B={shlex.quote(completion_body(model))}; " \
           f"T={timeout_s:g}\n"
    return head + _SCRIPT


def parse_smoke_output(stdout: str, keyed: bool, timeout_s: float, redactor: Redactor) -> SmokeResult:
    """Read what the smoke script printed (pure; tested on recorded shapes)."""
    found = read_curl_answer(stdout, MARK)
    if found is None:
        return SmokeResult(outcome="failed", detail="the smoke completion did not run on the node (no answer)")
    rc, body, status, took = found.rc, found.body, found.status, found.took_s
    if rc == 28:
        return SmokeResult(outcome="failed", detail=f"the smoke completion timed out after {timeout_s:g} s")
    if rc != 0:
        return SmokeResult(outcome="failed", detail=f"the smoke completion could not reach the server "
                                                    f"({unreachable_text(rc)})")
    if status == 200:
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if isinstance(data, dict) and isinstance(data.get("choices"), list) and data["choices"]:
            return SmokeResult(outcome="ok", ttft_s=took, status=status)
        return SmokeResult(outcome="failed", status=status,
                           detail="the smoke completion answered 200 without any choices")
    if status == 401 and not keyed:
        return SmokeResult(outcome="skipped", status=status,
                           detail="the server requires an API key and I hold none (set api_key_env)")
    message = redactor.text(error_text(body))[:ERROR_MAX] or "no error text"
    if status == 401:
        message = "the server refused the API key I hold"
    return SmokeResult(outcome="failed", status=status,
                       detail=f"the smoke completion failed: HTTP {status if status is not None else '?'} — {message}")


async def run_smoke(pool: NodePool, node: Node, service: Service, url: str | None, model: str | None,
                    key: str | None) -> SmokeResult:
    """Send the smoke completion from ``node`` to the server at ``url`` (as seen from the node)."""
    timeout = service.readiness.smoke_timeout
    if not url:
        return SmokeResult(outcome="skipped", detail="the server's URL is unknown (set api_url)")
    if not model or not MODEL_RE.match(model):
        return SmokeResult(outcome="skipped", detail="the served model name is unknown or unusual")
    if key is not None and ("\n" in key or "\r" in key):
        return SmokeResult(outcome="skipped", detail="the API key I hold contains a line break")
    script = build_smoke_script(url, model, timeout)
    redactor = Redactor([key] if key else [])
    try:
        result = await pool.run(node, remote_command(script), limit_s=timeout + node.timeout,
                                stdin=(key or "") + "\n")
    except NodeUnreachable as e:
        return SmokeResult(outcome="unreachable", detail=redactor.text(e.error.reason))
    found = parse_smoke_output(result.stdout, key is not None, timeout, redactor)
    if found.outcome == "skipped" and found.status == 401 and service.api_key_env:
        # Configured, but the variable is empty or unset in the bot's environment: say which one.
        found = found.model_copy(update={
            "detail": f"the server requires an API key and ${service.api_key_env} is not set for the bot"})
    return found
