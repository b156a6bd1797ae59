"""Who may restart what, and from where: the ``[access]`` policy applied to one asker.

Pure rules over Slack ids (never display names). Group membership is the only fact that needs the
Slack Web API; it comes in through the :class:`GroupLookup` protocol so this module stays testable
and Slack-free (the Slack implementation, with its short cache, lives in ``bot/``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from config.models import AccessPolicy
from services import mentions


class Asking(Protocol):
    """The parts of ``handlers.context.Asker`` the policy reads (kept structural: services never import handlers)."""

    @property
    def surface(self) -> str: ...
    @property
    def user_id(self) -> str | None: ...
    @property
    def channel_id(self) -> str | None: ...
    @property
    def usergroups(self) -> frozenset[str]: ...


class GroupLookup(Protocol):
    """Members of a Slack user group (``S…`` id → user ids)."""

    async def members(self, group_id: str) -> frozenset[str]: ...


class NoGroups:
    """A lookup that knows no groups (terminal, or no Slack client)."""

    async def members(self, group_id: str) -> frozenset[str]:
        """Always empty."""
        return frozenset()


class StaticGroups:
    """A fixed table of group members (tests, and configs that list members statically)."""

    def __init__(self, groups: dict[str, Iterable[str]]) -> None:
        self._groups = {g: frozenset(m) for g, m in groups.items()}
        self.calls = 0

    async def members(self, group_id: str) -> frozenset[str]:
        """The members of ``group_id`` (empty when unknown)."""
        self.calls += 1
        return self._groups.get(group_id, frozenset())


@dataclass(frozen=True)
class AccessDecision:
    """The answer: allowed or not, why, and (when refused) what an operator would change to allow it."""

    allowed: bool
    reason: str
    how_to_allow: str | None = None


def how_to_allow_snippet(user_id: str | None, service: str | None = None) -> str:
    """A TOML snippet an operator can paste to allow this person (by their Slack id)."""
    uid = user_id or "U01ABCDEF"
    table = "[access]" if service is None else f"[services.access]   # in the [[services]] entry of {service}"
    return f'{table}\nrestart_users = ["{uid}"]'


async def check_restart_access(
    policy: AccessPolicy, asker: Asking, groups: GroupLookup, service: str | None = None
) -> AccessDecision:
    """May ``asker`` restart (or confirm a restart) under ``policy``?

    Order: the terminal (whoever has the config and a shell) → the channel → the person. The default
    policy (no users, no groups) allows nobody in Slack, and the answer says how to allow it.
    """
    if asker.surface != "slack":
        # The terminal, with or without --json (one person, one answer): they have the config file and
        # a shell on the bot's host and could run systemctl themselves. State checks still apply.
        return AccessDecision(True, "terminal user")
    uid = asker.user_id
    if not uid:
        return AccessDecision(False, "the request has no Slack user id")
    if not policy.restart_users and not policy.restart_usergroups:
        return AccessDecision(
            False,
            "nobody may restart services yet — restarts are off until the config lists who may",
            how_to_allow_snippet(uid, service),
        )
    channel = asker.channel_id
    if policy.restart_channels and channel not in policy.restart_channels:
        where = "a direct message" if channel is None or channel.startswith("D") else mentions.channel(channel)
        allowed = ", ".join(mentions.channel(c) for c in policy.restart_channels)
        return AccessDecision(
            False,
            f"restarts are not allowed from {where}; ask in {allowed}",
            "add the channel id to restart_channels in [access]",
        )
    if uid in policy.restart_users:
        return AccessDecision(True, f"{mentions.user(uid)} is in restart_users")
    for group in policy.restart_usergroups:
        if group in asker.usergroups:
            return AccessDecision(True, f"{mentions.user(uid)} is in {mentions.usergroup(group)}")
    for group in policy.restart_usergroups:
        if uid in await groups.members(group):
            return AccessDecision(True, f"{mentions.user(uid)} is in {mentions.usergroup(group)}")
    return AccessDecision(
        False,
        f"{mentions.user(uid)} is not in restart_users or any of restart_usergroups",
        how_to_allow_snippet(uid, service),
    )


def check_second_person(policy: AccessPolicy, requested_by: str | None, confirmer: str | None) -> AccessDecision:
    """The two-person rule: with ``require_second_person`` the confirmer must not be the requester."""
    if policy.require_second_person and confirmer is not None and confirmer == requested_by:
        return AccessDecision(
            False, "two-person rule: someone else who may restart must confirm a restart you asked for"
        )
    return AccessDecision(True, "ok")
