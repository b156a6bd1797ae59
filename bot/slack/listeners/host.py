"""What the listeners need of the Slack bot behind the app (``bot.slack.app.SlackBot``), as a protocol:
``bot/slack/app.py`` registers the listeners, so they do not import it."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Protocol

from bot.slack.guards import Verdict
from bot.slack.restart_actions import RestartAction
from bot.slack.runtime import SlackRuntime
from bot.understanding.markup import Message


class Host(Protocol):
    """The runtime, the answers in flight, the per-person rate limit, the claims of events, and the
    question path every listener that asks something takes."""

    restart_action: RestartAction  # what a confirm/cancel click runs (the app's own: a test may put its own in)

    @property
    def runtime(self) -> SlackRuntime: ...

    def spawn(self, coro: Coroutine[Any, Any, None], what: str) -> None:
        """Run ``coro`` after the ack; failures are logged, never raised into Bolt."""

    async def check_rate(self, user: str) -> Verdict:
        """The rate-limit verdict for one more answer to ``user`` (counted over every replica)."""

    async def first_delivery(self, event_id: str) -> bool | None:
        """False for an event already claimed (a Slack retry), None when the store did not answer."""

    def on_question(self, *, kind: str, text: str | Message, user: str, channel: str, thread_ts: str | None,
                    event_id: str | None = None) -> None:
        """Take one question after the ack: claim its event, check the rate limit, answer in the thread."""

    async def command(self, verdict: asyncio.Future[Verdict], *, text: str | Message, user: str, channel: str,
                      response_url: str | None) -> None:
        """A slash command already acked: its rate-limit verdict (maybe still coming), then the answer."""
