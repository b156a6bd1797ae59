"""One change of a service at a time, and no restart in the middle of one: the change lock and its refusal.

A change holds ``change:<service>`` (every node of it) from its confirmation until it is kept or rolled back;
the store's ``running`` changes are the truth (a lock can expire while the bot is stopped), the lock the atomic
claim. A restart asked while a change runs is refused: it would cut the change's load or verify window short.
"""

from __future__ import annotations

from config.models import Service
from handlers.common import fmt_duration
from handlers.context import Context, require_store
from services import mentions
from services.store.records import ChangeRecord

STEP_WORDS = {
    "waiting": "waiting for its turn", "applying": "being applied", "loading": "loading the new settings",
    "verifying": "verifying", "rolling_back": "rolling back", "unapplying": "rolling back",
    "restoring": "loading the previous settings", "kept": "kept", "rolled_back": "rolled back",
    "rollback_failed": "rollback failed", "failed": "failed", "skipped": "not applied",
}


def change_lock(service: str) -> str:
    """The lock a change of ``service`` (all its nodes) holds until it is kept or rolled back."""
    return f"change:{service}"


def where_it_is(ch: ChangeRecord) -> str:
    """``verifying on gpu-a``, ``loading the new settings on gpu-b`` (the steps not done yet)."""
    busy = [f"{STEP_WORDS.get(s.state, s.state)} on {s.node}" for s in ch.steps
            if s.state not in ("waiting", "kept", "skipped")] or ["starting"]
    return ", ".join(busy)


def in_flight_words(ch: ChangeRecord, ctx: Context) -> str:
    """The refusal while ``ch`` runs: which change, who asked, where it is."""
    age = fmt_duration((ctx.now() - ch.created_at).total_seconds())
    return (f"refused: change #{ch.number} of {ch.service} is in flight ({where_it_is(ch)}; asked by "
            f"{mentions.user(ch.requested_by)} {age} ago) — the next change, revert or restart of {ch.service} "
            "is accepted once it is kept or rolled back")


async def running_change(ctx: Context, service: str, but: str | None = None) -> ChangeRecord | None:
    """The change of ``service`` still running (other than ``but``), if any."""
    found = [c for c in await require_store(ctx).changes.running(service) if c.id != but]
    return found[0] if found else None


async def restart_refusal(ctx: Context, service: Service) -> str | None:
    """Why a restart of ``service`` must wait for a settings change of it (None: no change runs)."""
    if ctx.store is None:
        return None
    ch = await running_change(ctx, service.name)
    return in_flight_words(ch, ctx) if ch is not None else None
