"""The audit log: one row per event (who, where, which service, which request), never changed afterwards."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from datetime import datetime

from sqlalchemy import Connection, func, insert, select

from services.store.engine import Repository, as_dict, aware, reading, utcnow, writing
from services.store.ports import Audit
from services.store.records import AuditEntry
from services.store.schema import audit_log

__all__ = ["AuditRepo"]


class AuditRepo(Repository, Audit):
    """:class:`~services.store.ports.Audit` on the ``inferbot_audit`` table."""

    @writing
    def record(self, conn: Connection, event: str, who: str | None, where: str | None, service: str | None,
               node: str | None, detail: str, at: datetime | None = None,
               request_id: str | None = None) -> AuditEntry:
        values = {"at": utcnow() if at is None else aware(at, "at"), "event": event, "who": who, "where": where,
                  "service": service, "node": node, "detail": detail, "request_id": request_id}
        result = conn.execute(insert(audit_log).values(**values))
        assert result.inserted_primary_key is not None
        return AuditEntry.model_validate({"id": int(result.inserted_primary_key[0]), **values})

    @reading
    def recent(self, conn: Connection, service: str | None = None, limit: int = 20) -> list[AuditEntry]:
        query = select(audit_log)
        if service is not None:
            query = query.where(audit_log.c.service == service)
        rows = conn.execute(query.order_by(audit_log.c.at.desc(), audit_log.c.id.desc()).limit(limit)).all()
        return [AuditEntry.model_validate(as_dict(r)) for r in rows]

    @reading
    def newest_by_target(self, conn: Connection, events: AbstractSet[str]) -> dict[tuple[str, str], AuditEntry]:
        newest = (select(audit_log.c.service, audit_log.c.node, func.max(audit_log.c.id).label("id"))
                  .where(audit_log.c.event.in_(sorted(events)), audit_log.c.service.is_not(None),
                         audit_log.c.node.is_not(None))
                  .group_by(audit_log.c.service, audit_log.c.node).subquery())
        rows = conn.execute(select(audit_log).join(newest, audit_log.c.id == newest.c.id)).all()
        out: dict[tuple[str, str], AuditEntry] = {}
        for r in rows:
            entry = AuditEntry.model_validate(as_dict(r))
            out[(str(entry.service), str(entry.node))] = entry
        return out

    @reading
    def has(self, conn: Connection, event: str, request_id: str) -> bool:
        return conn.execute(select(audit_log.c.id).where(audit_log.c.event == event,
                                                         audit_log.c.request_id == request_id).limit(1)
                            ).first() is not None
