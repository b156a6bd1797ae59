"""Metric samples for charts: what the watcher saw of each ready server's ``/metrics``, rated and downsampled.

Rates are computed against the previous sample of the same process. Samples are kept as taken for
:data:`SAMPLE_RAW_S`, then folded into :data:`SAMPLE_BUCKET_S` buckets, and dropped after :data:`SAMPLE_KEEP_S`.
Only the scheduler leader records them: the newest sample per service is remembered, and the next one is
rated against it and written with the leader's next batch (:mod:`services.store.write_queue`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Connection, Row, delete, func, insert, select
from sqlalchemy.exc import IntegrityError

from services.store.engine import Repository, as_dict, aware, in_thread, reading
from services.store.ports import MetricSamples
from services.store.records import MetricPoint
from services.store.schema import metric_samples
from services.store.write_queue import WriteQueue

__all__ = ["COMPACT_EVERY_S", "SAMPLE_BUCKET_S", "SAMPLE_KEEP_S", "SAMPLE_RAW_S", "SamplesRepo"]

SAMPLE_RAW_S = 24 * 3600
"""Metric samples are kept as taken for this long, then folded into buckets."""
SAMPLE_BUCKET_S = 300
"""The width of those buckets (5 minutes)."""
SAMPLE_KEEP_S = 7 * 24 * 3600
"""Metric samples older than this are dropped."""
COMPACT_EVERY_S = 600.0
"""How often (per process) recording a sample also folds and expires old ones."""
_MEANS = ("generation_tps", "prompt_tps", "running", "waiting", "kv_cache_usage")


def _counter_rate(before: float | None, after: float | None, dt_s: float) -> float | None:
    # A counter that went down was reset (the server restarted): no honest rate for this interval.
    if before is None or after is None or dt_s <= 0 or after < before:
        return None
    return (after - before) / dt_s


def _rate(prev: Mapping[str, Any], values: dict[str, Any]) -> None:
    """Set the token rates of the sample ``values`` from the previous sample of the same process."""
    if values["process_start"] is None or prev["process_start"] is None \
            or prev["process_start"] == values["process_start"]:
        dt = (values["at"] - prev["at"]).total_seconds()
        values["generation_tps"] = _counter_rate(prev["generation_total"], values["generation_total"], dt)
        values["prompt_tps"] = _counter_rate(prev["prompt_total"], values["prompt_total"], dt)


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


class SamplesRepo(Repository, MetricSamples):
    """:class:`~services.store.ports.MetricSamples` on ``inferbot_metric_samples``, through the leader's
    :class:`~services.store.write_queue.WriteQueue`."""

    def __init__(self, queue: WriteQueue) -> None:
        super().__init__(queue.db)
        self.queue = queue
        self._last: dict[tuple[str, str], dict[str, Any]] = queue.memo({})  # the newest sample recorded
        self._compacted_at = -COMPACT_EVERY_S  # monotonic time of the last fold of old samples

    async def record(self, service: str, node: str, at: datetime, *, generation_total: float | None,
                     prompt_total: float | None, running: float | None, waiting: float | None,
                     kv_cache_usage: float | None, process_start: datetime | None = None) -> MetricPoint | None:
        values: dict[str, Any] = {
            "service": service, "node": node, "at": aware(at, "at"), "resolution_s": 0,
            "generation_total": generation_total, "prompt_total": prompt_total, "running": running,
            "waiting": waiting, "kv_cache_usage": kv_cache_usage,
            "process_start": None if process_start is None else aware(process_start, "process_start"),
            "generation_tps": None, "prompt_tps": None,  # set from the previous sample, if it is of this process
        }
        last = self._last.get((service, node))
        if last is not None and values["at"] > last["at"]:
            # The previous sample is the one this process recorded last: rate it here, write it with the
            # next flush (the watcher records one per ready service per look).
            _rate(last, values)
            self.queue.insert_later(metric_samples, values)
            point: MetricPoint | None = MetricPoint.model_validate(values)
        elif last is not None and values["at"] == last["at"]:
            point = None  # already recorded (the database's unique key would refuse it)
        else:
            await self.queue.flush()  # the database answers: everything recorded so far is in it
            point = await self._record_first(values)
        if point is not None and (last is None or values["at"] > last["at"]):
            self._last[(service, node)] = values
        mono = time.monotonic()
        if mono - self._compacted_at >= COMPACT_EVERY_S:
            self._compacted_at = mono
            await self.compact(values["at"])
        return point

    @in_thread
    def _record_first(self, values: dict[str, Any]) -> MetricPoint | None:
        """A sample with no predecessor in memory: rated against the newest one in the database."""
        c = metric_samples.c
        try:
            with self.db.write() as conn:
                prev = conn.execute(select(metric_samples).where(c.service == values["service"],
                                                                 c.node == values["node"], c.at < values["at"])
                                    .order_by(c.at.desc()).limit(1)).first()
                if prev is not None:
                    _rate(as_dict(prev), values)
                conn.execute(insert(metric_samples).values(**values))
        except IntegrityError:
            return None
        return MetricPoint.model_validate(values)

    async def between(self, service: str, node: str, since: datetime,
                      until: datetime | None = None) -> list[MetricPoint]:
        await self.queue.flush()
        return await self._between(service, node, since, until)

    @reading
    def _between(self, conn: Connection, service: str, node: str, since: datetime,
                 until: datetime | None) -> list[MetricPoint]:
        c = metric_samples.c
        query = select(metric_samples).where(c.service == service, c.node == node, c.at >= aware(since, "since"))
        if until is not None:
            query = query.where(c.at <= aware(until, "until"))
        rows = conn.execute(query.order_by(c.at, c.id)).all()
        return [MetricPoint.model_validate(as_dict(r)) for r in rows]

    async def latest(self) -> dict[tuple[str, str], MetricPoint]:
        await self.queue.flush()
        return await self._latest()

    @reading
    def _latest(self, conn: Connection) -> dict[tuple[str, str], MetricPoint]:
        c = metric_samples.c
        newest = select(c.service, c.node, func.max(c.at).label("at")).group_by(c.service, c.node).subquery()
        query = select(metric_samples).join(newest, (c.service == newest.c.service) & (c.node == newest.c.node)
                                            & (c.at == newest.c.at))
        rows = conn.execute(query.order_by(c.id)).all()
        return {(str(r.service), str(r.node)): MetricPoint.model_validate(as_dict(r)) for r in rows}

    async def compact(self, now: datetime) -> tuple[int, int]:
        await self.queue.flush()
        return await self._compact(now)

    @in_thread
    def _compact(self, now: datetime) -> tuple[int, int]:
        now = aware(now, "now")
        width = SAMPLE_BUCKET_S
        edge = now - timedelta(seconds=SAMPLE_RAW_S)
        edge = datetime.fromtimestamp(edge.timestamp() // width * width, UTC)  # whole buckets only
        c = metric_samples.c
        try:
            with self.db.write() as conn:
                dropped = conn.execute(delete(metric_samples).where(c.at < now - timedelta(seconds=SAMPLE_KEEP_S))
                                       ).rowcount
                rows = conn.execute(select(metric_samples).where(c.resolution_s == 0, c.at < edge)
                                    .order_by(c.at, c.id)).all()
                _fold(conn, rows, width)
        except IntegrityError:
            return 0, 0  # another process folded the same buckets just now
        return len(rows), int(dropped)


def _fold(conn: Connection, rows: Sequence[Row[Any]], width: int) -> None:
    """Replace raw samples by one row per ``width``-second bucket (means of the gauges and rates)."""
    buckets: dict[tuple[str, str, float], list[Row[Any]]] = {}
    for r in rows:
        buckets.setdefault((str(r.service), str(r.node), r.at.timestamp() // width * width), []).append(r)
    for (service, node, start), members in buckets.items():
        conn.execute(insert(metric_samples).values(
            service=service, node=node, at=datetime.fromtimestamp(start, UTC), resolution_s=width,
            **{col: _mean([getattr(m, col) for m in members]) for col in _MEANS},
            generation_total=members[-1].generation_total, prompt_total=members[-1].prompt_total,
            process_start=members[-1].process_start,
        ))
    if rows:
        conn.execute(delete(metric_samples).where(metric_samples.c.id.in_([r.id for r in rows])))
