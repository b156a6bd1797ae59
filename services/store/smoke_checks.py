"""The smoke completion of each load: its outcome decides the ✅; the first result recorded for a load wins."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Connection, select

from services.store.engine import Repository, as_dict, aware, in_thread, insert_once, reading
from services.store.ports import SmokeChecks
from services.store.records import SmokeCheck
from services.store.schema import smoke_checks

__all__ = ["SmokeChecksRepo"]


def _get(conn: Connection, service: str, node: str, invocation_id: str) -> SmokeCheck | None:
    c = smoke_checks.c
    row = conn.execute(select(smoke_checks).where(c.service == service, c.node == node,
                                                  c.invocation_id == invocation_id)).first()
    return None if row is None else SmokeCheck.model_validate(as_dict(row))


class SmokeChecksRepo(Repository, SmokeChecks):
    """:class:`~services.store.ports.SmokeChecks` on the ``inferbot_smoke_checks`` table."""

    @in_thread
    def record(self, service: str, node: str, invocation_id: str, outcome: str, ttft_s: float | None,
               detail: str, at: datetime) -> SmokeCheck:
        insert_once(self.db, smoke_checks, {"service": service, "node": node, "invocation_id": invocation_id,
                                           "outcome": outcome, "ttft_s": ttft_s, "detail": detail,
                                           "at": aware(at, "at")})
        with self.db.read() as conn:
            found = _get(conn, service, node, invocation_id)
        assert found is not None
        return found

    @reading
    def get(self, conn: Connection, service: str, node: str, invocation_id: str) -> SmokeCheck | None:
        return _get(conn, service, node, invocation_id)
