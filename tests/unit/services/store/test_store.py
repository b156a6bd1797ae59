"""services/store/store.py: the Store — in memory or on a file, closed for good, APScheduler's jobs in the same
database, and two bot processes sharing one SQLite file (snapshots, load history and locks through it).

Each aggregate's own behaviour is tested beside its repository (test_locks.py, test_requests.py, …).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from services.settings_diff import diff_snapshots
from services.store.schema import JOBSTORE_TABLE
from services.store.store import Store

ROOT = Path(__file__).resolve().parents[4]
T0 = datetime(2026, 2, 21, 13, 0, tzinfo=UTC)


def run_python(code: str, *args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


async def test_in_memory_url_and_closed_store() -> None:
    s = Store("sqlite://")
    await asyncio.gather(*(s.audit.record("e", None, None, "kimi", None, str(i)) for i in range(10)))
    assert len(await s.audit.recent("kimi")) == 10
    await s.close()
    with pytest.raises(RuntimeError, match="closed"):
        await s.audit.recent()


async def test_apscheduler_jobstore_shares_the_file(store: Store, url: str) -> None:
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore

    assert store.jobstore_url() == url
    await store.audit.record("startup", None, None, None, None, "bot started")
    jobstore = SQLAlchemyJobStore(url=store.jobstore_url(), tablename=JOBSTORE_TABLE)
    jobstore.start(None, "default")
    try:
        assert jobstore.get_all_jobs() == []
    finally:
        jobstore.shutdown()
    assert len(await store.audit.recent()) == 1


# --------------------------------------------------------------------------------------------------
# two bot processes


OTHER_BOT = """
    import asyncio, json, sys
    from datetime import UTC, datetime
    from services.models import ServiceState
    from services.store.store import Store

    async def main() -> None:
        url, rounds = sys.argv[1], int(sys.argv[2])
        store = Store(url)
        # what this bot process saw: a settings change and a load
        base = dict(service="kimi", node="gpu-a", unit="vllm-kimi.service", state="ready",
                    model="moonshotai/Kimi-K2", flags={"max-model-len": "131072"},
                    env={"HF_TOKEN": "[redacted]"}, version="0.11.0", settings_source="process")
        await store.snapshots.record(ServiceState(**base), datetime(2026, 2, 21, 13, 0, tzinfo=UTC))
        base["flags"] = {"max-model-len": "65536", "enable-expert-parallel": True}
        await store.snapshots.record(ServiceState(**base), datetime(2026, 2, 21, 14, 0, tzinfo=UTC))
        await store.loads.record("kimi", "gpu-a", "inv-1", datetime(2026, 2, 21, 13, 0, tzinfo=UTC),
                                 datetime(2026, 2, 21, 13, 30, tzinfo=UTC), "ready", 1802.0)
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)  # "go": race the test process for the same locks
        now = datetime(2026, 2, 21, tzinfo=UTC)
        won = [i for i in range(rounds) if await store.locks.acquire(f"lock-{i}", "other-bot", 30, now)]
        await store.close()
        print(json.dumps(won), flush=True)

    asyncio.run(main())
"""
ROUNDS = 60


@pytest.fixture(scope="module", autouse=True)
def other_bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """Another bot process on a shared SQLite file, started as the module starts (a Python start-up
    costs most of a second: it imports while the other tests run); killed at the end if still there."""
    url = f"sqlite:///{tmp_path_factory.mktemp('procs') / 'inferbot.sqlite3'}"
    proc = run_python(OTHER_BOT, url, str(ROUNDS))
    yield url, proc
    if proc.poll() is None:
        proc.kill()
    proc.communicate()


async def test_two_bot_processes_share_the_store(other_bot: tuple[str, subprocess.Popen[str]]) -> None:
    url, proc = other_bot
    store = Store(url)
    try:
        await store.audit.recent()  # this process has the file open too
        assert proc.stdout is not None
        line = await asyncio.to_thread(proc.stdout.readline)
        assert line.strip() == "ready", proc.communicate()[1]

        # snapshots written by the other process, diffed by this one
        latest = await store.snapshots.latest("kimi", "gpu-a")
        assert len(latest) == 2 and latest[0].first_seen_at == datetime(2026, 2, 21, 14, 0, tzinfo=UTC)
        assert latest[1].env == {"HF_TOKEN": "[redacted]"}
        assert [(d.kind, d.key, d.old, d.new) for d in diff_snapshots(latest[1], latest[0])] == [
            ("flag", "enable-expert-parallel", None, True), ("flag", "max-model-len", "131072", "65536")]
        assert await store.loads.durations("kimi", "gpu-a") == [1802.0]

        # both processes race for the same locks: each lock has exactly one winner
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        now = datetime(2026, 2, 21, tzinfo=UTC)
        mine = {i for i in range(ROUNDS) if await store.locks.acquire(f"lock-{i}", "this-bot", 30, now)}
        out, err = await asyncio.to_thread(proc.communicate, timeout=20)
        assert proc.returncode == 0, err
        theirs = set(json.loads(out))
        assert mine | theirs == set(range(ROUNDS)) and not mine & theirs
        for i in (0, ROUNDS - 1):
            assert await store.locks.holder(f"lock-{i}", now) == ("this-bot" if i in mine else "other-bot")
    finally:
        await store.close()
