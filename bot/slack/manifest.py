"""What slack-manifest.yaml must grant, recorded by the same call that registers a listener with Bolt.

A listener module's ``register(app, bot)`` gets a :class:`Registrar`, never Bolt's app bare: registering
an event, the slash command or a button *is* recording it (with the scope it needs) in the app's
:class:`Manifest`, so there is no second list to keep in step. ``tests/slack/test_slack_manifest.py``
compares the record with slack-manifest.yaml, and the record with Bolt's own listeners.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from slack_bolt.app.async_app import AsyncApp

Listener = Callable[..., Awaitable[Any]]
"""A Bolt listener or middleware: Bolt passes the arguments it names (``ack``, ``body``, ``event``…)."""


@dataclass
class Manifest:
    """What the app listens to and calls, in manifest terms: event subscriptions, slash commands, the
    action ids of its buttons (which need interactivity) and the bot's OAuth scopes."""

    events: set[str] = field(default_factory=set)
    commands: set[str] = field(default_factory=set)
    actions: set[str] = field(default_factory=set)
    scopes: set[str] = field(default_factory=set)


class Registrar:
    """Bolt's listener registration, each call also recording what the manifest needs for it."""

    def __init__(self, app: AsyncApp, manifest: Manifest) -> None:
        self.bolt = app
        self.manifest = manifest

    def event(self, event: str, listener: Listener, *, scope: str | None, subscription: str | None = None) -> None:
        """Listen to ``event``; the manifest subscribes to ``subscription`` (``message.im`` for the
        ``message`` events of DMs; the event's own name by default), which needs ``scope`` (None: no scope,
        as ``app_home_opened``)."""
        self.bolt.event(event)(listener)
        self.manifest.events.add(subscription or event)
        if scope is not None:
            self.manifest.scopes.add(scope)

    def command(self, command: str, listener: Listener) -> None:
        """Listen to the slash command ``command`` (the ``commands`` scope)."""
        self.bolt.command(command)(listener)
        self.manifest.commands.add(command)
        self.manifest.scopes.add("commands")

    def action(self, action_ids: Iterable[str], listener: Listener) -> None:
        """Listen to the buttons ``action_ids`` (one Bolt listener each; interactivity, no scope)."""
        for action_id in action_ids:
            self.bolt.action(action_id)(listener)
            self.manifest.actions.add(action_id)

    def uses(self, scopes: Iterable[str]) -> None:
        """Record the scopes of Web API methods the app calls (``Poster.SCOPES``, ``SlackGroups.SCOPES``)."""
        self.manifest.scopes.update(scopes)

    def middleware(self, middleware: Listener) -> None:
        """Bolt global middleware (it asks the manifest for nothing)."""
        self.bolt.middleware(middleware)
