"""Settings changes: a row per change (numbered, for people to say "#12") and a row per node's step."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Any

from pydantic import JsonValue
from sqlalchemy import Connection, insert, select, update

from services.store.engine import Repository, as_dict, aware, reading, writing
from services.store.ports import Changes
from services.store.records import CHANGE_FINAL, ChangeRecord, ChangeStep
from services.store.schema import change_steps, changes

__all__ = ["ChangesRepo"]
_CHANGE_FIELDS = frozenset({"spec", "diff", "preflight", "checked_with", "outcome"})
_STEP_FIELDS = frozenset(ChangeStep.model_fields) - {"change_id", "node", "position", "state", "state_at"}


def _steps(conn: Connection, ids: list[str]) -> dict[str, list[ChangeStep]]:
    out: dict[str, list[ChangeStep]] = {i: [] for i in ids}
    if not ids:
        return out
    rows = conn.execute(select(change_steps).where(change_steps.c.change_id.in_(ids))
                        .order_by(change_steps.c.change_id, change_steps.c.position)).all()
    for r in rows:
        step = ChangeStep.model_validate(as_dict(r))
        out[step.change_id].append(step)
    return out


def _records(conn: Connection, rows: Sequence[Any]) -> list[ChangeRecord]:
    found = [as_dict(r) for r in rows]
    steps = _steps(conn, [str(r["id"]) for r in found])
    return [ChangeRecord.model_validate({**r, "steps": steps[str(r["id"])]}) for r in found]


def _checked(fields: Mapping[str, object] | None, allowed: frozenset[str]) -> dict[str, object]:
    values = dict(fields or {})
    unknown = set(values) - allowed
    if unknown:
        raise ValueError(f"not a field that moves: {sorted(unknown)}")
    return {k: aware(v, k) if isinstance(v, datetime) else v for k, v in values.items()}


class ChangesRepo(Repository, Changes):
    """:class:`~services.store.ports.Changes` on the ``inferbot_changes`` and ``inferbot_change_steps`` tables."""

    @writing
    def create(self, conn: Connection, change_id: str, op: str, service: str, nodes: Sequence[str],
               spec: Mapping[str, JsonValue] | None, requested_by: str | None, at: datetime) -> ChangeRecord:
        if not nodes:
            raise ValueError("a change needs at least one node")
        at = aware(at, "at")
        conn.execute(insert(changes).values(
            id=change_id, op=op, service=service, node=nodes[0], spec=dict(spec) if spec is not None else None,
            diff=[], preflight=[], checked_with="", requested_by=requested_by, created_at=at, state="proposed",
            state_at=at))
        for position, node in enumerate(nodes):
            conn.execute(insert(change_steps).values(change_id=change_id, node=node, position=position,
                                                     state="waiting", state_at=at))
        row = conn.execute(select(changes).where(changes.c.id == change_id)).one()
        return _records(conn, [row])[0]

    @reading
    def get(self, conn: Connection, change_id: str) -> ChangeRecord | None:
        row = conn.execute(select(changes).where(changes.c.id == change_id)).first()
        return None if row is None else _records(conn, [row])[0]

    @reading
    def numbered(self, conn: Connection, number: int) -> ChangeRecord | None:
        row = conn.execute(select(changes).where(changes.c.number == number)).first()
        return None if row is None else _records(conn, [row])[0]

    @reading
    def recent(self, conn: Connection, service: str | None = None, limit: int = 20) -> list[ChangeRecord]:
        query = select(changes).order_by(changes.c.number.desc()).limit(limit)
        if service is not None:
            query = query.where(changes.c.service == service)
        return _records(conn, conn.execute(query).all())

    @reading
    def running(self, conn: Connection, service: str | None = None) -> list[ChangeRecord]:
        query = select(changes).where(changes.c.state == "running")
        if service is not None:
            query = query.where(changes.c.service == service)
        rows = conn.execute(query.order_by(changes.c.number)).all()
        return _records(conn, rows)

    @writing
    def move(self, conn: Connection, change_id: str, from_states: AbstractSet[str], to_state: str, at: datetime,
             fields: Mapping[str, object] | None = None) -> bool:
        if not from_states:
            raise ValueError("from_states is empty")
        values = _checked(fields, _CHANGE_FIELDS)
        at = aware(at, "at")
        values.update(state=to_state, state_at=at)
        if to_state in CHANGE_FINAL:
            values["finished_at"] = at
        query = update(changes).where(changes.c.id == change_id, changes.c.state.in_(sorted(from_states)))
        return conn.execute(query.values(**values)).rowcount == 1

    @writing
    def move_step(self, conn: Connection, change_id: str, node: str, from_states: AbstractSet[str], to_state: str,
                  at: datetime, fields: Mapping[str, object] | None = None, if_at: datetime | None = None) -> bool:
        if not from_states:
            raise ValueError("from_states is empty")
        values = _checked(fields, _STEP_FIELDS)
        values.update(state=to_state, state_at=aware(at, "at"))
        query = update(change_steps).where(change_steps.c.change_id == change_id, change_steps.c.node == node,
                                           change_steps.c.state.in_(sorted(from_states)))
        if if_at is not None:
            query = query.where(change_steps.c.state_at == aware(if_at, "if_at"))
        return conn.execute(query.values(**values)).rowcount == 1
