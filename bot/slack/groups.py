"""Slack user groups for the restart permission (``services.access.GroupLookup`` on Slack)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

log = logging.getLogger("inferbot.restart")
GROUP_CACHE_S = 300.0


class SlackGroups:
    """User-group members from ``usergroups.users.list``, cached for ``ttl`` seconds per group."""

    SCOPES: Mapping[str, str] = {
        "usergroups:read": "usergroups.users.list: restart permission by user group (restart issue)",
    }
    """The OAuth scope of the one Web API method this class calls, and why."""

    def __init__(self, client: AsyncWebClient, ttl: float = GROUP_CACHE_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client, self.ttl, self.clock = client, ttl, clock
        self._cache: dict[str, tuple[float, frozenset[str]]] = {}
        self.calls = 0

    async def members(self, group_id: str) -> frozenset[str]:
        """The user ids in ``group_id`` (empty, and not cached, when Slack can't say)."""
        hit = self._cache.get(group_id)
        if hit is not None and self.clock() - hit[0] < self.ttl:
            return hit[1]
        self.calls += 1
        try:
            # POST (form-encoded), which every Web API method accepts; slack_sdk's helper would use GET.
            resp = await self.client.api_call("usergroups.users.list", data={"usergroup": group_id})
        except (SlackApiError, SlackClientError, OSError, TimeoutError) as e:
            # Refuse rather than guess: a failed lookup means "not a member" this time.
            log.warning("usergroups.users.list failed for %s: %s", group_id, type(e).__name__)
            return frozenset()
        users = frozenset(str(u) for u in (resp.get("users") or []))
        self._cache[group_id] = (self.clock(), users)
        return users
