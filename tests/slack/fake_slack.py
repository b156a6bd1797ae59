"""A fake Slack in the test process: Web API, response_url, file uploads and the Socket Mode websocket.

Runs on 127.0.0.1 with a random port in the test's own event loop and records every call body.

    fs = await FakeSlack().start()
    client = AsyncWebClient(token="xoxb-test", base_url=fs.api_url)
    ...
    calls = await fs.wait_for("chat.postMessage", 1)
    await fs.stop()
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

from aiohttp import WSMsgType, web

BOT_USER_ID = "UBOT"
BOT_ID = "BBOT"
TEAM_ID = "T0TEAM"


@dataclass
class Call:
    """One request the fake received: the Web API method (or ``response:<id>`` / ``upload:<id>``) and body."""

    method: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float = field(default_factory=time.monotonic)


def _maybe_json(v: str) -> Any:
    if v[:1] in "[{":
        try:
            return json.loads(v)
        except ValueError:
            return v
    return v


# Slack's documented Block Kit limits (what views.publish and chat.postMessage check before they accept blocks).
VIEW_MAX_BLOCKS = 100
MESSAGE_MAX_BLOCKS = 50
_BLOCK_TYPES = {"section", "context", "divider", "header", "actions", "image", "input", "rich_text"}


def view_problems(view: Any, kind: str) -> list[str]:
    """Why Slack would refuse ``view`` (a ``views.publish`` payload), as a list of reasons; [] when valid."""
    if isinstance(view, str):
        view = _maybe_json(view)
    if not isinstance(view, dict):
        return ["view is not an object"]
    out: list[str] = []
    if view.get("type") != kind:
        out.append(f"view type {view.get('type')!r} is not {kind!r}")
    blocks = view.get("blocks")
    if not isinstance(blocks, list) or not blocks:
        return [*out, "view has no blocks"]
    if len(str(view.get("private_metadata", ""))) > 3000:
        out.append("private_metadata over 3000 characters")
    return out + block_problems(blocks, VIEW_MAX_BLOCKS)


def message_problems(blocks: Any) -> list[str]:
    """Why Slack would refuse a message's ``blocks`` (``chat.postMessage`` / ``chat.update``): [] when valid."""
    if isinstance(blocks, str):
        blocks = _maybe_json(blocks)
    if blocks in (None, "", []):
        return []  # a text-only message
    if not isinstance(blocks, list):
        return ["blocks is not a list"]
    return block_problems(blocks, MESSAGE_MAX_BLOCKS)


def _check_text(out: list[str], obj: Any, limit: int, where: str) -> None:
    if not isinstance(obj, dict) or obj.get("type") not in ("plain_text", "mrkdwn"):
        out.append(f"{where}: not a text object")
        return
    text = obj.get("text")
    if not isinstance(text, str) or not text:
        out.append(f"{where}: empty text")
    elif len(text) > limit:
        out.append(f"{where}: {len(text)} characters (max {limit})")


def _check_element(out: list[str], el: Any, where: str) -> None:
    if not isinstance(el, dict):
        out.append(f"{where}: not an element")
        return
    if el.get("type") == "button":
        _check_text(out, el.get("text"), 75, f"{where} text")
        if el.get("text", {}).get("type") != "plain_text":
            out.append(f"{where}: button text must be plain_text")
        aid = str(el.get("action_id", ""))
        if not aid or len(aid) > 255:
            out.append(f"{where}: bad action_id")
        if len(str(el.get("value", ""))) > 2000:
            out.append(f"{where}: value over 2000 characters")
        if el.get("style") not in (None, "primary", "danger"):
            out.append(f"{where}: bad style")


def _check_section(out: list[str], b: dict[str, Any], where: str, action_ids: set[str]) -> None:
    if "text" not in b and "fields" not in b:
        out.append(f"{where}: section without text or fields")
    if "text" in b:
        _check_text(out, b["text"], 3000, f"{where} text")
    fields = b.get("fields", [])
    if len(fields) > 10:
        out.append(f"{where}: {len(fields)} fields (max 10)")
    for k, f in enumerate(fields):
        _check_text(out, f, 2000, f"{where} field {k}")
    if "accessory" in b:
        _check_element(out, b["accessory"], f"{where} accessory")
        action_ids.add(str(b["accessory"].get("action_id")))


def _check_block(out: list[str], b: Any, where: str, action_ids: set[str]) -> None:
    if not isinstance(b, dict) or b.get("type") not in _BLOCK_TYPES:
        out.append(f"{where}: unknown block type")
        return
    bid = b.get("block_id")
    if bid is not None and len(str(bid)) > 255:
        out.append(f"{where}: block_id over 255 characters")
    t = b["type"]
    if t == "section":
        _check_section(out, b, where, action_ids)
    elif t == "header":
        _check_text(out, b.get("text"), 150, f"{where} header")
        if b.get("text", {}).get("type") != "plain_text":
            out.append(f"{where}: header text must be plain_text")
    elif t == "context":
        els = b.get("elements", [])
        if not els or len(els) > 10:
            out.append(f"{where}: {len(els)} context elements (1..10)")
        for k, e in enumerate(els):
            _check_text(out, e, 2000, f"{where} element {k}")
    elif t == "actions":
        els = b.get("elements", [])
        if not els or len(els) > 25:
            out.append(f"{where}: {len(els)} actions (1..25)")
        for k, e in enumerate(els):
            _check_element(out, e, f"{where} element {k}")


def block_problems(blocks: list[Any], max_blocks: int) -> list[str]:
    """Why Slack would refuse these blocks (per-block limits of the Block Kit reference); [] when valid."""
    out: list[str] = []
    if len(blocks) > max_blocks:
        out.append(f"{len(blocks)} blocks (max {max_blocks})")
    action_ids: set[str] = set()
    for i, b in enumerate(blocks):
        _check_block(out, b, f"block {i}", action_ids)
    return out


class FakeSlack:
    """The fake. ``fail_once(method, status=429, retry_after=0)`` makes the next call to ``method`` fail
    (``response:<rid>`` for a response_url: its answer is the error's text, as Slack's is)."""

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.uploads: dict[str, bytes] = {}  # file id -> the bytes POSTed to its upload_url
        self.acks: list[dict[str, Any]] = []
        self.connections_opened = 0  # apps.connections.open calls
        self.websockets_accepted = 0
        self.sockets: list[web.WebSocketResponse] = []
        self._failures: dict[str, list[tuple[int, dict[str, Any], dict[str, str]]]] = {}
        self._changed = asyncio.Condition()
        self._ts = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.invalid_views: list[list[str]] = []  # why views.publish refused a view, per refused call
        self.invalid_messages: list[list[str]] = []  # why chat.postMessage / chat.update refused blocks

    # -- lifecycle
    async def start(self) -> FakeSlack:
        app = web.Application()
        app.router.add_post("/api/{method}", self._api)
        app.router.add_post("/response/{rid}", self._response)
        app.router.add_post("/upload/{fid}", self._upload)
        app.router.add_get("/link", self._link)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        for ws in list(self.sockets):
            await ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- addresses
    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        return f"{self.base}/api/"

    def response_url(self, rid: str = "r1") -> str:
        return f"{self.base}/response/{rid}"

    # -- behaviour switches
    def fail_once(self, method: str, status: int = 429, retry_after: int | None = 0,
                  body: dict[str, Any] | None = None) -> None:
        """The next call to ``method`` answers ``status`` (429 → ``Retry-After``, ``ratelimited``)."""
        headers = {"Retry-After": str(retry_after)} if retry_after is not None else {}
        default = {"ok": False, "error": "ratelimited" if status == 429 else "fatal_error"}
        self._failures.setdefault(method, []).append((status, body or default, headers))

    # -- recording
    async def _record(self, method: str, body: dict[str, Any], request: web.Request) -> None:
        async with self._changed:
            self.calls.append(Call(method, body, {k.lower(): v for k, v in request.headers.items()}))
            self._changed.notify_all()

    def calls_to(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    async def wait_for(self, method: str, count: int = 1, within: float = 3.0) -> list[Call]:
        """Wait until at least ``count`` calls to ``method`` arrived; returns them."""
        async def enough() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: len(self.calls_to(method)) >= count)

        try:
            await asyncio.wait_for(enough(), within)
        except TimeoutError:
            raise AssertionError(f"expected {count} call(s) to {method}, got {len(self.calls_to(method))}: "
                                 f"{[c.method for c in self.calls]}") from None
        return self.calls_to(method)

    async def quiet(self, seconds: float = 0.2) -> None:
        """Let in-flight work finish (to assert that nothing more arrives)."""
        await asyncio.sleep(seconds)

    # -- Web API
    async def _body(self, request: web.Request) -> dict[str, Any]:
        # slack_sdk sends some arguments as the query string (``params``), the rest as form or JSON.
        query = {k: _maybe_json(v) for k, v in request.query.items()}
        raw = await request.text()
        ctype = request.headers.get("Content-Type", "")
        if "json" in ctype:
            return {**query, **(json.loads(raw) if raw else {})}
        if "multipart" in ctype:
            return {**query, "_multipart": True}
        return {**query, **{k: _maybe_json(v) for k, v in parse_qsl(raw, keep_blank_values=True)}}

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        body = await self._body(request)
        await self._record(method, body, request)
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bearer x"):
            return web.json_response({"ok": False, "error": "not_authed"})
        queue = self._failures.get(method)
        if queue:
            status, fbody, headers = queue.pop(0)
            return web.json_response(fbody, status=status, headers=headers)
        return web.json_response(self._answer(method, body), headers={"x-oauth-scopes": "chat:write,commands"})

    def _answer(self, method: str, body: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {"ok": True, "url": "https://fake.slack/", "team": "Fake", "user": "inferbot",
                    "team_id": TEAM_ID, "user_id": BOT_USER_ID, "bot_id": BOT_ID}
        if method in ("chat.postMessage", "chat.update") and (problems := message_problems(body.get("blocks"))):
            self.invalid_messages.append(problems)
            return {"ok": False, "error": "invalid_blocks", "response_metadata": {"messages": problems}}
        if method in ("chat.postMessage", "chat.update"):
            ts = body.get("ts") or f"{1_700_000_000 + next(self._ts)}.000100"
            return {"ok": True, "channel": body.get("channel"), "ts": ts,
                    "message": {"text": body.get("text"), "ts": ts}}
        if method == "chat.postEphemeral":
            return {"ok": True, "message_ts": f"{1_700_000_000 + next(self._ts)}.000200"}
        if method == "apps.connections.open":
            self.connections_opened += 1
            return {"ok": True, "url": f"ws://127.0.0.1:{self.port}/link"}
        if method == "usergroups.users.list":
            return {"ok": True, "users": []}
        if method == "views.publish":
            problems = view_problems(body.get("view"), "home")
            if problems or not str(body.get("user_id", "")).startswith(("U", "W")):
                self.invalid_views.append(problems or ["user_id is not a user id"])
                return {"ok": False, "error": "invalid_arguments", "response_metadata": {"messages": problems}}
            return {"ok": True, "view": {"id": "V" + uuid.uuid4().hex[:8].upper(), **body["view"]}}
        if method == "conversations.open":
            return {"ok": True, "channel": {"id": "D" + str(body.get("users", "X")).lstrip("UW")[:10]}}
        if method == "files.getUploadURLExternal":
            fid = "F" + uuid.uuid4().hex[:8].upper()
            return {"ok": True, "upload_url": f"{self.base}/upload/{fid}", "file_id": fid}
        if method == "files.completeUploadExternal":
            files = body.get("files") or []
            return {"ok": True, "files": [{"id": f.get("id"), "title": f.get("title")} for f in files]}
        return {"ok": True}

    async def _response(self, request: web.Request) -> web.Response:
        body = await self._body(request)
        method = f"response:{request.match_info['rid']}"
        await self._record(method, body, request)
        queue = self._failures.get(method)  # fail_once("response:r1", 400, body={"error": "invalid_blocks"})
        if queue:
            status, fbody, headers = queue.pop(0)
            return web.Response(text=str(fbody.get("error", "")), status=status, headers=headers)
        return web.Response(text="ok")

    async def _upload(self, request: web.Request) -> web.Response:
        data = await request.read()
        self.uploads[request.match_info["fid"]] = data
        await self._record(f"upload:{request.match_info['fid']}", {"size": len(data),
                                                                     "content": data.decode(errors="replace")},
                           request)
        return web.Response(text="OK")

    # -- Socket Mode
    async def _link(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()  # autoping: answers the client's pings
        await ws.prepare(request)
        self.sockets.append(ws)
        self.websockets_accepted += 1
        async with self._changed:
            self._changed.notify_all()
        await ws.send_json({"type": "hello", "num_connections": 1, "debug_info": {"host": "fake"}})
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    data = json.loads(msg.data)
                    async with self._changed:
                        self.acks.append(data)
                        self._changed.notify_all()
        finally:
            if ws in self.sockets:
                self.sockets.remove(ws)
            async with self._changed:
                self._changed.notify_all()
        return ws

    async def wait_connected(self, accepted: int = 1, within: float = 3.0) -> None:
        """Wait until ``accepted`` websockets were accepted in all, and the newest is open."""
        async def ok() -> None:
            async with self._changed:
                await self._changed.wait_for(
                    lambda: self.websockets_accepted >= accepted and bool(self.sockets)
                    and not self.sockets[-1].closed)

        await asyncio.wait_for(ok(), within)

    async def send_envelope(self, type_: str, payload: dict[str, Any], retry_attempt: int = 0,
                            retry_reason: str = "") -> str:
        """Push an envelope to the newest open websocket; returns its envelope id."""
        envelope_id = str(uuid.uuid4())
        ws = [s for s in self.sockets if not s.closed][-1]
        await ws.send_json({"envelope_id": envelope_id, "type": type_, "payload": payload,
                            "accepts_response_payload": type_ != "events_api",
                            "retry_attempt": retry_attempt, "retry_reason": retry_reason})
        return envelope_id

    async def wait_ack(self, envelope_id: str, within: float = 2.0) -> dict[str, Any]:
        async def got() -> None:
            async with self._changed:
                await self._changed.wait_for(lambda: any(a.get("envelope_id") == envelope_id for a in self.acks))

        await asyncio.wait_for(got(), within)
        return next(a for a in self.acks if a.get("envelope_id") == envelope_id)

    async def send_disconnect(self) -> None:
        """What Slack sends before it rotates a connection: the client must reconnect."""
        ws = [s for s in self.sockets if not s.closed][-1]
        await ws.send_json({"type": "disconnect", "reason": "refresh_requested", "debug_info": {"host": "fake"}})
