"""One structured chat completion sent from the node: ``/v1/chat/completions`` with a JSON schema.

Used to ask a cluster's own model a small question (issue 23: what an unplaced message means). The remote
command is a fixed template whose only values are the validated URL and the timeout. Everything else — the
API key, the request body with the person's words in it — travels on stdin as curl's own config (``-K -``):
never on a command line, never read by a shell. The answer is parsed here into a :class:`ChatResult`; its
error text is redacted before it leaves this module.
"""

from __future__ import annotations

import json
import shlex
from typing import Literal

from pydantic import Field, field_validator

from config.models import API_URL_RE, Node
from services.models import Model
from services.node.curl_answer import error_text, read_curl_answer, unreachable_text
from services.node.probe import remote_command
from services.node.smoke import MODEL_RE
from services.node.ssh import NodePool, NodeUnreachable
from services.redact import Redactor

ChatOutcome = Literal["ok", "failed", "timeout", "unreachable"]
MARK = "@@inferbot-chat@@"
ERROR_MAX = 300
CONTENT_MAX = 4096  # an answer longer than this is no answer to a short classification

_SCRIPT = r"""set -u
o=$(curl -s -K - --connect-timeout "$T" --max-time "$T" -H 'Content-Type: application/json' \
    -w '\n%{http_code} %{time_total}' "$U/v1/chat/completions" 2>/dev/null); r=$?
echo "$M rc=$r"; printf '%s' "$o" | base64 -w0; echo
"""


class ChatMessage(Model):
    """One message of the conversation."""

    role: Literal["system", "user"]
    content: str = Field(max_length=16384)


class ChatRequest(Model):
    """A chat completion whose answer must follow ``schema`` (vLLM's structured output, OpenAI's shape)."""

    model: str
    messages: list[ChatMessage]
    schema_name: str = Field(pattern=r"^[A-Za-z0-9_-]{1,64}$")
    json_schema: dict[str, object]
    max_tokens: int = Field(default=128, ge=1, le=1024)

    @field_validator("model")
    @classmethod
    def _model_name(cls, v: str) -> str:
        # The served name as the probe read it: only names of the smoke completion's shape are sent at all.
        if not MODEL_RE.match(v):
            raise ValueError("refusing a model name with unusual characters")
        return v

    def body(self) -> str:
        """The JSON body: temperature 0, the schema as ``response_format`` (vLLM since 0.6, and the OpenAI API)."""
        return json.dumps({
            "model": self.model, "messages": [m.model_dump() for m in self.messages], "max_tokens": self.max_tokens,
            "temperature": 0,
            "response_format": {"type": "json_schema",
                                "json_schema": {"name": self.schema_name, "schema": self.json_schema, "strict": True}},
        }, ensure_ascii=True)


class ChatResult(Model):
    """What the chat completion gave: the assistant's content when it answered (``ok``), else why not."""

    outcome: ChatOutcome
    content: str | None = None
    took_s: float | None = None
    detail: str = ""


def _curl_quoted(value: str) -> str:
    """``value`` as a double-quoted parameter of curl's config file (its escapes: ``\\\\`` and ``\\"``)."""
    if any(c in value for c in "\r\n\0"):
        raise ValueError("a curl config value cannot hold a line break")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def curl_config(request: ChatRequest, key: str | None) -> str:
    """What goes on stdin: curl's config with the body (``data-raw``: a leading ``@`` is no file name) and the
    API key's header. ``ensure_ascii`` keeps the body on one line whatever the person typed."""
    lines = [f"data-raw = {_curl_quoted(request.body())}"]
    if key:
        lines.append(f"header = {_curl_quoted('Authorization: Bearer ' + key)}")
    return "\n".join(lines) + "\n"


def build_chat_script(url: str, timeout_s: float) -> str:
    """The remote script (the URL validated, both values shlex-quoted); everything else comes on stdin."""
    if not API_URL_RE.match(url):
        raise ValueError(f"refusing api_url {url!r}")
    return f"M={shlex.quote(MARK)}; U={shlex.quote(url.rstrip('/'))}; T={timeout_s:g}\n" + _SCRIPT


def parse_chat_output(stdout: str, timeout_s: float, redactor: Redactor) -> ChatResult:
    """Read what the chat script printed (pure; tested on recorded shapes)."""
    found = read_curl_answer(stdout, MARK)
    if found is None:
        return ChatResult(outcome="failed", detail="the chat completion did not run on the node (no answer)")
    rc, body, status, took = found.rc, found.body, found.status, found.took_s
    if rc == 28:
        return ChatResult(outcome="timeout", detail=f"the model did not answer within {timeout_s:g} s")
    if rc != 0:
        return ChatResult(outcome="failed",
                          detail=f"the chat completion could not reach the server ({unreachable_text(rc)})")
    if status != 200:
        message = redactor.text(error_text(body))[:ERROR_MAX] or "no error text"
        code = status if status is not None else "?"
        return ChatResult(outcome="failed", took_s=took, detail=f"the chat completion failed: HTTP {code} — {message}")
    try:
        data = json.loads(body)
        content = data["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        return ChatResult(outcome="failed", took_s=took, detail="the chat completion answered 200 without a message")
    if not isinstance(content, str) or len(content) > CONTENT_MAX:
        return ChatResult(outcome="failed", took_s=took, detail="the chat completion's message is not a short text")
    return ChatResult(outcome="ok", content=content, took_s=took)


async def run_chat(pool: NodePool, node: Node, url: str, request: ChatRequest, key: str | None,
                   timeout_s: float) -> ChatResult:
    """Send ``request`` from ``node`` to the server at ``url`` (as seen from the node); at most ``timeout_s`` of
    the server's time."""
    if key is not None and any(c in key for c in "\r\n\0"):
        return ChatResult(outcome="failed", detail="the API key I hold contains a line break")
    script = build_chat_script(url, timeout_s)
    redactor = Redactor([key] if key else [])
    try:
        result = await pool.run(node, remote_command(script), limit_s=timeout_s + node.timeout,
                                stdin=curl_config(request, key), read_only=True)
    except NodeUnreachable as e:
        return ChatResult(outcome="unreachable", detail=redactor.text(e.error.reason))
    return parse_chat_output(result.stdout, timeout_s, redactor)
