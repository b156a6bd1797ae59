"""The one way anything the bot says reaches Slack: answers, notices, confirmations, charts and files,
refusals and rate-limit lines, ephemeral answers and the App Home tab.

Everything here is inert unless the bot made it live: messages come rendered and escaped by
``bot.slack.blocks``; a line of the bot's own is escaped here; every call says ``parse="none"`` and no
``link_names`` (Slack links no raw URL, ``#channel`` or ``@name``). When Slack refuses a message's blocks
(``invalid_blocks``, ``msg_blocks_too_long``…, or a response_url's ``400 invalid_blocks``) the same message
goes again as its plain text, so an answer that renders badly is still read. Retries (rate limits, 5xx,
connection errors) are slack_sdk's own retry handlers, those of the Web API client the Poster is built on,
for the response_url too.

Two tiers:
- the calls (``message``, ``edit``, ``respond``, ``ephemeral``, ``upload``, ``publish``) and the handlers'
  ``Notifier`` (``post``, ``update``, ``ephemeral``) raise when Slack still refuses
  (``SlackApiError`` / ``SlackClientError``, ``OSError``, ``TimeoutError``): the caller decides whether to
  retry later (the notice pipeline does) or tell someone;
- what answers a person (``say``, ``attach``, ``line``, ``open_dm``) never raises: a failure is logged with
  its reason, and the result says whether everything arrived.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.web.async_slack_response import AsyncSlackResponse
from slack_sdk.webhook.async_client import AsyncWebhookClient

from bot.slack.blocks import (
    SlackMessage,
    attachment_sections,
    escape,
    failure_message,
    render_failure,
    render_messages,
)
from handlers.notify import notice_text
from handlers.reply import Attachment, Reply

log = logging.getLogger("inferbot.slack")

SLACK_ERRORS = (SlackClientError, OSError, TimeoutError)
"""What a call to Slack raises once slack_sdk's retry handlers gave up (``SlackApiError`` is a client error)."""
BLOCKS_REFUSED = frozenset({"invalid_blocks", "msg_blocks_too_long", "invalid_blocks_format"})
"""Slack's errors that mean "these blocks, not this message": sent again as plain text."""
RESPONSE_URL_POSTS = 5
"""Slack takes at most this many messages through one response_url; the rest go by ``chat.postMessage``."""
INERT: dict[str, Any] = {"parse": "none", "link_names": False}
"""On every message: Slack makes nothing live but the markup the bot wrote."""
NO_UNFURL: dict[str, Any] = {"unfurl_links": False, "unfurl_media": False}


@dataclass(frozen=True)
class Where:
    """Where an answer goes: a channel (and thread), or a slash command's ``response_url`` — then the
    channel takes what the URL cannot (more than :data:`RESPONSE_URL_POSTS` messages)."""

    channel: str
    thread_ts: str | None = None
    response_url: str | None = None


def _reason(e: BaseException) -> str:
    if isinstance(e, SlackApiError):
        return str(e.response.get("error") or e.response.status_code)
    return f"{type(e).__name__}: {e}" if isinstance(e, OSError) else type(e).__name__


def _refused_blocks(e: SlackApiError) -> str | None:
    reason = str(e.response.get("error") or e.response.status_code)
    return reason if reason in BLOCKS_REFUSED else None


async def _blocks_or_text(send: Callable[..., Awaitable[AsyncSlackResponse]], m: SlackMessage, channel: str,
                          what: str) -> AsyncSlackResponse:
    """``send`` ``m`` with its blocks; when Slack refuses the blocks (not the message), its text alone."""
    try:
        return await send(blocks=m.blocks, text=m.text)
    except SlackApiError as e:
        reason = _refused_blocks(e)
        if reason is None:
            raise
        log.warning("Slack refused the blocks%s; sending the plain text instead", what,
                    extra={"event": "slack-post", "channel": channel, "reason": reason})
        return await send(text=m.text)


def notice_messages(reply: Reply) -> list[SlackMessage]:
    """``reply`` as Slack messages; if it cannot be laid out, one line with its notice and why (logged)."""
    try:
        return render_messages(reply)
    except Exception as e:
        log.exception("rendering a notice for Slack failed", extra={"event": "slack-render", "intent": reply.intent})
        return [failure_message(notice_text(reply), f"the full message could not be laid out ({render_failure(e)})")]


def attachment_messages(reply: Reply, att: Attachment) -> list[SlackMessage]:
    """An attachment as messages (when it could not be uploaded as a file)."""
    return render_messages(Reply(intent=reply.intent, title=att.title or att.filename, status=reply.status,
                                 sections=attachment_sections(att)))


class Poster:
    """Posts, edits, responds, uploads and publishes on Slack through one Web API client; the handlers'
    ``Notifier`` (``handlers/ports.py``) on Slack."""

    SCOPES: Mapping[str, str] = {
        "chat:write": "chat.postMessage / chat.update / chat.postEphemeral: every answer and notice",
        "files:write": "files.uploadV2: long output (logs) and charts as files in the thread",
        "im:write": "conversations.open: a Home-tab Restart is confirmed in a DM with the person",
    }
    """The OAuth scopes of the Web API methods this class calls, and why."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client

    # -- the calls: raise when Slack refuses (after slack_sdk's retries)
    async def message(self, channel: str, thread_ts: str | None, m: SlackMessage) -> str:
        """``chat.postMessage`` ``m``; returns its ts. Refused blocks → its plain text."""

        async def send(**content: Any) -> AsyncSlackResponse:
            return await self.client.chat_postMessage(channel=channel, thread_ts=thread_ts, **content, **NO_UNFURL,
                                                      **INERT)

        resp = await _blocks_or_text(send, m, channel, "")
        return str(resp.get("ts") or "")

    async def edit(self, channel: str, ts: str, m: SlackMessage) -> None:
        """``chat.update`` message ``ts`` with ``m``. Refused blocks → its plain text (the old blocks removed)."""

        async def send(**content: Any) -> AsyncSlackResponse:
            return await self.client.chat_update(channel=channel, ts=ts, **{"blocks": [], **content}, **INERT)

        await _blocks_or_text(send, m, channel, " of an edit")

    async def respond(self, response_url: str, m: SlackMessage, *, ephemeral: bool = False) -> None:
        """Post ``m`` to a ``response_url`` (a slash command's, a click's), never replacing the original.
        Refused blocks → its plain text; any other refusal raises ``SlackClientError``."""
        hook = AsyncWebhookClient(url=response_url, retry_handlers=self.client.retry_handlers)
        body: dict[str, Any] = {"text": m.text, "response_type": "ephemeral" if ephemeral else "in_channel",
                                "replace_original": False, "parse": "none"}
        resp = await hook.send_dict({**body, "blocks": m.blocks} if m.blocks else body)
        if resp.status_code != 200 and m.blocks and resp.body.strip() in BLOCKS_REFUSED:
            log.warning("Slack refused the blocks at the response_url; sending the plain text instead",
                        extra={"event": "slack-post", "reason": resp.body.strip()})
            resp = await hook.send_dict(body)
        if resp.status_code != 200:
            raise SlackClientError(f"response_url answered {resp.status_code}")

    async def ephemeral(self, channel: str, user: str, text: str, thread_ts: str | None = None) -> None:
        """A line only ``user`` sees (``text`` is escaped: only the bot's own mentions are live)."""
        await self.client.chat_postEphemeral(channel=channel, user=user, thread_ts=thread_ts, text=escape(text),
                                             **INERT)

    async def upload(self, channel: str, thread_ts: str | None, *, content: str | bytes, filename: str,
                     title: str | None, alt_text: str | None = None) -> None:
        """A file into the thread (``files_upload_v2``: Slack's external upload flow)."""
        extra: dict[str, Any] = {"alt_txt": alt_text} if alt_text is not None else {}
        await self.client.files_upload_v2(channel=channel, thread_ts=thread_ts, content=content,
                                          filename=filename, title=title, **extra)

    async def publish(self, user: str, view: dict[str, Any]) -> None:
        """``views.publish``: ``view`` becomes ``user``'s App Home tab."""
        await self.client.views_publish(user_id=user, view=view)

    # -- handlers.ports.Notifier
    async def post(self, channel: str, thread_ts: str | None, reply: Reply) -> str:
        """Post ``reply`` (in ``thread_ts`` when given); returns the ts of its first message."""
        first: str | None = None
        for m in notice_messages(reply):
            ts = await self.message(channel, thread_ts, m)
            first = first or ts
        assert first is not None  # render_messages always yields at least one message
        return first

    async def update(self, channel: str, ts: str, reply: Reply) -> None:
        """Rewrite the message ``ts`` with ``reply`` (its first part; edits are short by design)."""
        await self.edit(channel, ts, notice_messages(reply)[0])

    # -- answering a person: never raises; False (logged) when something did not arrive
    async def say(self, where: Where, messages: list[SlackMessage]) -> bool:
        """Post ``messages`` in order (to the response_url first, when there is one); stop at the first
        that fails, logged with the reason."""
        for i, m in enumerate(messages):
            part = {"part": i + 1, "parts": len(messages)}
            url = where.response_url if i < RESPONSE_URL_POSTS else None
            try:
                if url:
                    await self.respond(url, m)
                else:  # a slash command's overflow needs the bot in the channel: logged if it is not
                    await self.message(where.channel, where.thread_ts, m)
            except SLACK_ERRORS as e:
                what = "could not post the answer to the response_url" if url else "could not post the answer"
                log.warning(what, extra={"event": "slack-post", "channel": where.channel, "reason": _reason(e),
                                         **part})
                return False
        return True

    async def attach(self, where: Where, reply: Reply) -> bool:
        """The reply's attachments as files in the thread; one that cannot be uploaded, as messages."""
        ok = True
        for att in reply.attachments:
            try:
                await self.upload(where.channel, where.thread_ts, content=att.content, filename=att.filename,
                                  title=att.title)
                continue
            except SLACK_ERRORS as e:
                log.warning("file upload failed; posting it as messages",
                            extra={"event": "slack-upload", "channel": where.channel, "reason": _reason(e)})
            ok = await self.say(where, attachment_messages(reply, att)) and ok
        return ok

    async def line(self, where: Where, text: str, *, ephemeral_to: str | None = None) -> bool:
        """One line of the bot's own (escaped): in the thread, only for ``ephemeral_to``, or, at a
        response_url, only for the person who asked there. False (logged) when it could not be said."""
        try:
            if where.response_url:
                m = SlackMessage(blocks_json=b"[]", text_utf8=escape(text).encode())
                await self.respond(where.response_url, m, ephemeral=True)
            elif ephemeral_to:
                await self.ephemeral(where.channel, ephemeral_to, text, where.thread_ts)
            else:
                await self.client.chat_postMessage(channel=where.channel, thread_ts=where.thread_ts,
                                                   text=escape(text), **NO_UNFURL, **INERT)
            return True
        except SLACK_ERRORS as e:
            log.warning("could not post a line", extra={"event": "slack-post", "channel": where.channel,
                                                        "reason": _reason(e)})
            return False

    async def open_dm(self, user: str) -> str | None:
        """The id of the DM channel with ``user`` (``conversations.open``), or None (logged)."""
        try:
            resp = await self.client.conversations_open(users=user)
        except SLACK_ERRORS as e:
            log.warning("conversations.open failed: %s", _reason(e), extra={"event": "slack-post"})
            return None
        channel = resp.get("channel") or {}
        return str(channel.get("id")) if isinstance(channel, dict) and channel.get("id") else None
