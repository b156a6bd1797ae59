"""Every listener of the Slack app, one module per thing people do (as in Bolt's starter template).

Each module's ``register(app, bot)`` registers its listeners with Bolt through the app's
:class:`~bot.slack.manifest.Registrar`, which records what slack-manifest.yaml needs for them in the same
call: ``questions`` (mentions and DMs), ``command`` (``/inferbot``), ``requests`` (a confirmation's confirm
and cancel), ``suggestions`` ("Did you mean `status kimi`?"), ``home`` (the App Home tab and its buttons).
What reaches them at all is decided first, by ``bot.slack.guards``' middleware.
"""

from __future__ import annotations

from bot.slack.listeners import command, home, questions, requests, suggestions
from bot.slack.listeners.host import Host
from bot.slack.manifest import Registrar

SCOPES: dict[str, str] = {**questions.SCOPES, **command.SCOPES}
"""The scopes of the events and the command the listeners subscribe to, and why."""


def register_listeners(app: Registrar, bot: Host) -> None:
    """Register every listener of the app (and record each in the app's manifest)."""
    questions.register(app, bot)
    command.register(app, bot)
    requests.register(app, bot)
    suggestions.register(app, bot)
    home.register(app, bot)
