"""Thanks, greetings and a lone emoji: one line back, never the help table."""

from __future__ import annotations

from handlers.context import Context, Request
from handlers.reply import Reply

LINE = "Anytime! Ask me about a service (e.g. “status kimi”), or say “help”."


async def handle(ctx: Context, req: Request) -> Reply:
    """One line: a thank-you, a greeting or an emoji needs no table."""
    return Reply(intent="smalltalk", title=LINE, status="info", sections=[], data={})
