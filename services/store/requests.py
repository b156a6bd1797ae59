"""Confirmable requests of every kind (restart, bench, …): a row each, every transition a compare-and-set."""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select, update

from services.store.engine import (
    Database,
    Repository,
    as_dict,
    aware,
    in_thread,
    insert_once,
    reading,
    update_row,
    writing,
)
from services.store.ports import Requests
from services.store.records import REQUEST_KINDS, REQUEST_TRANSITIONS, ConfirmableRequest, RequestKind
from services.store.schema import requests

__all__ = ["OPEN_STATES", "RequestsRepo"]

OPEN_STATES = ("pending", "confirmed", "running")
"""States a request is not finished in (a process that stopped may have left it there)."""


class RequestsRepo(Repository, Requests):
    """:class:`~services.store.ports.Requests` on the ``inferbot_requests`` table.

    ``kinds``: the kind names it stores (a request of another kind is refused with ``ValueError``).
    """

    def __init__(self, db: Database, kinds: Iterable[RequestKind] = REQUEST_KINDS) -> None:
        super().__init__(db)
        self.kinds = frozenset(kinds)

    @in_thread
    def create(self, request_id: str, service: str, node: str, unit: str, requested_by: str | None,
               channel: str | None, thread_ts: str | None, created_at: datetime, expires_at: datetime,
               force: bool, message_ts: str | None = None, *, kind: RequestKind) -> bool:
        if kind not in self.kinds:
            raise ValueError(f"unknown request kind {kind!r}")
        return insert_once(self.db, requests, {
            "id": request_id, "kind": kind, "service": service, "node": node, "unit": unit,
            "requested_by": requested_by, "channel": channel, "thread_ts": thread_ts,
            "message_channel": channel if message_ts else None, "message_ts": message_ts,
            "created_at": aware(created_at, "created_at"), "expires_at": aware(expires_at, "expires_at"),
            "force": bool(force), "state": "pending",
        })

    @reading
    def get(self, conn: Connection, request_id: str) -> ConfirmableRequest | None:
        row = conn.execute(select(requests).where(requests.c.id == request_id)).first()
        return None if row is None else ConfirmableRequest.model_validate(as_dict(row))

    @writing
    def transition(self, conn: Connection, request_id: str, from_states: AbstractSet[str], to_state: str,
                   actor: str | None, at: datetime) -> bool:
        _check_transition(from_states, to_state)
        at = aware(at, "at")
        values: dict[str, Any] = {"state": to_state, "state_by": actor, "state_at": at}
        query = update(requests).where(requests.c.id == request_id, requests.c.state.in_(sorted(from_states)))
        if to_state == "confirmed":
            values.update(confirmed_by=actor, confirmed_at=at)
            query = query.where(requests.c.expires_at > at)
        return conn.execute(query.values(**values)).rowcount == 1

    @in_thread
    def set_message(self, request_id: str, channel: str, ts: str) -> bool:
        return update_row(self.db, requests, {"id": request_id}, {"message_channel": channel, "message_ts": ts})

    @reading
    def unfinished(self, conn: Connection) -> list[ConfirmableRequest]:
        rows = conn.execute(select(requests).where(requests.c.state.in_(OPEN_STATES))
                            .order_by(requests.c.created_at, requests.c.id)).all()
        return [ConfirmableRequest.model_validate(as_dict(r)) for r in rows]


def _check_transition(from_states: AbstractSet[str], to_state: str) -> None:
    if to_state not in REQUEST_TRANSITIONS:
        raise ValueError(f"unknown request state {to_state!r}")
    if not from_states:
        raise ValueError("from_states is empty")
    for state in from_states:
        if to_state not in REQUEST_TRANSITIONS.get(state, frozenset()):
            raise ValueError(f"a request can't go from {state!r} to {to_state!r}")
