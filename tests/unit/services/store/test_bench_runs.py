"""services/store/bench_runs.py: an acceptance benchmark is claimed by one process, ended once, and keeps the
notice it produced (so a post that failed is retried with the same words)."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from services.store.bench_runs import BenchRunsRepo
from services.store.engine import Database

T0 = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)
NOTICE = "✅ kimi on gpu-a benchmark: 82.1 tok/s single-stream, −0.5 % vs 2026-02-21; 1,540 tok/s peak, +0.3 %"


async def test_one_claim_one_end_and_the_notice_kept(db: Database, db2: Database) -> None:
    a, b = BenchRunsRepo(db), BenchRunsRepo(db2)
    assert await a.get("ready:kimi@gpu-a:inv-1") is None
    claims = await asyncio.gather(*(r.claim("ready:kimi@gpu-a:inv-1", "kimi", "gpu-a", T0) for r in (a, b) * 3))
    assert sum(claims) == 1  # whichever replica gets there first runs it
    running = await b.get("ready:kimi@gpu-a:inv-1")
    assert running is not None and (running.state, running.service, running.node) == ("running", "kimi", "gpu-a")
    assert running.started_at == T0 and running.text is None

    data = {"verdict": "ok", "kind": "bench.ok", "peak": {"concurrency": 64, "change_pct": 0.3}}
    ended = T0 + timedelta(minutes=3)
    assert await a.finish("ready:kimi@gpu-a:inv-1", "done", NOTICE, "ok", data, ended)
    # The stale-run sweep of another replica comes too late: the run ended already, with its notice.
    assert not await b.finish("ready:kimi@gpu-a:inv-1", "failed", "❌ interrupted", "error", {}, ended)
    done = await b.get("ready:kimi@gpu-a:inv-1")
    assert done is not None and (done.state, done.text, done.status, done.data) == ("done", NOTICE, "ok", data)
    assert done.finished_at == T0 + timedelta(minutes=3)
    assert not await a.claim("ready:kimi@gpu-a:inv-1", "kimi", "gpu-a", T0 + timedelta(hours=1))  # never again
