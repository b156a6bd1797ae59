"""Acceptance benchmarks: claimed by an insert (so each runs once), ended with the notice they posted."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from pydantic import JsonValue
from sqlalchemy import Connection, select, update

from services.store.engine import Repository, as_dict, aware, in_thread, insert_once, reading, writing
from services.store.ports import BenchRuns
from services.store.records import BenchRun
from services.store.schema import bench_runs

__all__ = ["BenchRunsRepo"]


class BenchRunsRepo(Repository, BenchRuns):
    """:class:`~services.store.ports.BenchRuns` on the ``inferbot_bench_runs`` table."""

    @in_thread
    def claim(self, run_id: str, service: str, node: str, at: datetime) -> bool:
        return insert_once(self.db, bench_runs, {"id": run_id, "service": service, "node": node, "state": "running",
                                                "started_at": aware(at, "at")})

    @writing
    def finish(self, conn: Connection, run_id: str, state: str, text: str, status: str,
               data: Mapping[str, JsonValue], at: datetime) -> bool:
        query = update(bench_runs).where(bench_runs.c.id == run_id, bench_runs.c.state == "running")
        return conn.execute(query.values(state=state, text=text, status=status, data=dict(data),
                                         finished_at=aware(at, "at"))).rowcount == 1

    @reading
    def get(self, conn: Connection, run_id: str) -> BenchRun | None:
        row = conn.execute(select(bench_runs).where(bench_runs.c.id == run_id)).first()
        return None if row is None else BenchRun.model_validate(as_dict(row))
