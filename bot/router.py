"""Text → ``Intent``: the understanding engine (``bot/understanding/``) read once, for the dispatcher.

A message from Slack arrives already read (``markup.read(text, "slack")``: its quotes, code and strike
kept); a string is read as typed in the terminal.
"""

from __future__ import annotations

from bot.understanding.markup import Message, read
from bot.understanding.names import Aliases, service_aliases
from bot.understanding.reading import Reading, understand
from config.models import BotConfig

Intent = Reading
__all__ = ["Aliases", "Intent", "route", "service_aliases"]


def route(text: str | Message, config: BotConfig, aliases: Aliases | None = None) -> Intent:
    """Route a message to a command, its targets and its typed arguments. Never raises on garbage; no I/O."""
    message = text if isinstance(text, Message) else read(text, "terminal")
    return understand(message, config, aliases)
