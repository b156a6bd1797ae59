"""services/store/smoke_checks.py: the smoke completion of a load, recorded once — a bot started again reads the
same result instead of sending a second completion."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from services.store.engine import Database
from services.store.smoke_checks import SmokeChecksRepo

T0 = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)


async def test_the_first_result_of_a_load_stays(db: Database, db2: Database) -> None:
    a, b = SmokeChecksRepo(db), SmokeChecksRepo(db2)
    assert await a.get("kimi", "gpu-a", "inv-1") is None
    first = await a.record("kimi", "gpu-a", "inv-1", "ok", 0.412, "", T0)
    assert (first.outcome, first.ttft_s, first.detail, first.at) == ("ok", 0.412, "", T0)
    again = await b.record("kimi", "gpu-a", "inv-1", "failed", None, "HTTP 500", T0 + timedelta(seconds=5))
    assert again == first  # another process's later result of the same load does not replace it
    assert await b.get("kimi", "gpu-a", "inv-1") == first
    other = await b.record("kimi", "gpu-a", "inv-2", "skipped", None, "the server's URL is unknown (set api_url)", T0)
    assert other.outcome == "skipped" and await a.get("kimi", "gpu-b", "inv-1") is None
