"""Replicas on a real PostgreSQL (and SQLite where it applies): the database URL and its password, schema
versions, and scheduler leadership with fencing and takeover (the state they share through the store:
tests/unit/services/store/test_shared_state.py)."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from bot.check import check_state
from config.models import BotConfig, StateSettings
from services.store.db_url import DatabaseUrlError, database_url, describe
from services.store.leader import PgLeader, SoleLeader, current_leader
from services.store.migrate import SchemaTooNew, head_version, run_alembic
from services.store.schema import SCHEMA_HEAD
from services.store.schema import metadata as store_metadata
from services.store.store import Store
from tests.pg import PASSWORD, USER, PgServer

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 12, 2, 22, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'inferbot.sqlite3'}"
    server: PgServer = request.getfixturevalue("pg_server")
    return server.url(server.database())


# -- the URL and its password ---------------------------------------------------------------------------


def test_password_only_from_the_environment(tmp_path: Path) -> None:
    with pytest.raises(DatabaseUrlError) as e:
        database_url("postgresql://inferbot:hunter2-pw@db:5432/inferbot", {})
    assert "must not hold the password" in str(e.value) and "hunter2-pw" not in str(e.value)
    assert "\n" not in str(e.value)

    url = database_url("postgresql://inferbot@db:5432/inferbot", {"INFERBOT_DB_PASSWORD": "s3cret-pw"})
    assert url.drivername == "postgresql+psycopg" and url.password == "s3cret-pw"
    assert "s3cret-pw" not in str(url) and "s3cret-pw" not in repr(url)
    assert describe(url) == "PostgreSQL inferbot@db:5432/inferbot"
    assert "s3cret-pw" not in Store(url).url and "s3cret-pw" not in Store(url).describe()

    pw = tmp_path / "db_password"
    pw.write_text("from-a-file\n")
    assert database_url("postgres://u@h/d", {"INFERBOT_DB_PASSWORD_FILE": str(pw)}).password == "from-a-file"
    with pytest.raises(DatabaseUrlError, match="cannot read it"):
        database_url("postgresql://u@h/d", {"INFERBOT_DB_PASSWORD_FILE": str(tmp_path / "missing")})
    (tmp_path / "empty").write_text("")
    with pytest.raises(DatabaseUrlError, match="is empty"):
        database_url("postgresql://u@h/d", {"INFERBOT_DB_PASSWORD_FILE": str(tmp_path / "empty")})
    with pytest.raises(DatabaseUrlError, match="not a database URL"):
        database_url("db:5432 with pw hunter2", {})
    assert describe(database_url(f"sqlite:///{tmp_path}/x.sqlite3", {})) == f"SQLite {tmp_path}/x.sqlite3"


def test_cli_refuses_a_password_in_the_config(tmp_path: Path) -> None:
    cfg = tmp_path / "inferbot.toml"
    cfg.write_text('[[nodes]]\nname = "gpu-a"\nhost = "127.0.0.4"\n\n'
                   '[state]\nurl = "postgresql://inferbot:hunter2-pw@127.0.0.1:1/inferbot"\n')
    out = subprocess.run([sys.executable, "-m", "bot.cli", "ask", "--config", str(cfg), "status"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0 and "INFERBOT_DB_PASSWORD" in out.stderr
    assert "hunter2" not in out.stderr + out.stdout


# -- schema versions --------------------------------------------------------------------------------------


async def test_schema_is_versioned_and_matches_the_code(url: str) -> None:
    store = Store(url)
    assert await store.schema_status() == (None, head_version())
    assert await store.prepare() == head_version() == SCHEMA_HEAD
    assert await store.schema_status() == (SCHEMA_HEAD, SCHEMA_HEAD)
    await store.close()
    # the migrations create exactly what the code's tables describe (alembic check: nothing to generate)
    engine = create_engine(Store(url).jobstore_url())
    with engine.begin() as conn:
        run_alembic(conn, "check")
    engine.dispose()


async def test_an_older_bot_refuses_a_newer_schema(url: str) -> None:
    store = Store(url)
    await store.prepare()
    await store.close()
    engine = create_engine(Store(url).jobstore_url())
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099'"))
    engine.dispose()
    old = Store(url)
    with pytest.raises(SchemaTooNew) as e:
        await old.audit.record("startup", None, None, None, None, "")
    msg = str(e.value)
    assert f"schema version 0099, newer than this inferbot knows ({SCHEMA_HEAD})" in msg and "\n" not in msg
    assert PASSWORD not in msg
    await old.close()


async def test_a_database_from_before_versions_is_adopted(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.sqlite3'}"
    engine = create_engine(url)
    store_metadata.create_all(engine)  # what inferbot did before Alembic
    with engine.begin() as conn:
        conn.execute(text("INSERT INTO inferbot_audit (at, event, detail) VALUES ('2026-01-01 00:00:00', "
                          "'startup', 'kept')"))
    engine.dispose()
    store = Store(url)
    assert await store.prepare() == SCHEMA_HEAD
    assert [e.detail for e in await store.audit.recent()] == ["kept"]
    assert await store.shared.claim_event("Ev1", NOW)  # the new tables are there
    await store.close()


async def test_check_shows_the_store(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = make_url(url)
    if parsed.password:  # the config names no password: it comes from the environment
        monkeypatch.setenv("INFERBOT_DB_PASSWORD", str(parsed.password))
        parsed = parsed._replace(password=None, drivername="postgresql")
    cfg = BotConfig(state=StateSettings(url=parsed.render_as_string(), dir=str(tmp_path)))
    before = await check_state(cfg)
    assert before["ok"] and before["schema"] is None
    store = Store(url)
    await store.prepare()
    after = await check_state(cfg)
    assert after["ok"] and after["schema"] == SCHEMA_HEAD and "up to date" in str(after["line"])
    assert PASSWORD not in str(after)
    if store.is_postgres:
        assert "PostgreSQL inferbot@127.0.0.1" in str(after["line"]) and "no leader" in str(after["line"])
        leader = PgLeader(store.sqlalchemy_url, replica="host-a:1")
        elected = asyncio.Event()

        async def on_elected() -> None:
            elected.set()

        await leader.start(on_elected, _noop)
        await asyncio.wait_for(elected.wait(), 10)
        line = str((await check_state(cfg))["line"])
        assert "leader host-a:1 since" in line
        await leader.stop()
    else:
        assert str(after["line"]).startswith(f"SQLite {tmp_path}")
    await store.close()


# -- leadership --------------------------------------------------------------------------------------------


async def _noop() -> None:
    return None


class Campaign:
    """One replica's leadership with a record of when it was elected and when it lost."""

    def __init__(self, leader: PgLeader | SoleLeader) -> None:
        self.leader = leader
        self.elected: list[float] = []
        self.lost: list[float] = []

    async def start(self) -> None:
        async def on_elected() -> None:
            self.elected.append(time.monotonic())

        async def on_lost() -> None:
            self.lost.append(time.monotonic())

        await self.leader.start(on_elected, on_lost)


async def until(pred: object, within: float, what: str) -> float:
    start = time.monotonic()
    while not pred():  # type: ignore[operator]
        if time.monotonic() - start > within:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
    return time.monotonic() - start


async def test_sqlite_is_always_the_leader() -> None:
    c = Campaign(SoleLeader("one"))
    await c.start()
    assert c.leader.role == "leader" and len(c.elected) == 1
    await c.leader.stop()
    assert len(c.lost) == 1  # the scheduler was told to stop


@pytest.fixture
async def pg_db(pg_server: PgServer) -> str:
    return pg_server.database()


async def test_one_leader_and_takeover_when_its_session_is_killed(pg_server: PgServer, pg_db: str) -> None:
    url = make_url(pg_server.url(pg_db))
    a, b = Campaign(PgLeader(url, replica="a:1", poll_s=0.2)), Campaign(PgLeader(url, replica="b:2", poll_s=0.2))
    await a.start()
    await until(lambda: a.elected, 10, "a leader")
    await b.start()
    await asyncio.sleep(1.0)
    try:
        assert (a.leader.role, b.leader.role) == ("leader", "standby") and not b.elected
        info = await current_leader(url)
        assert info is not None and info.replica == "a:1"
        # the leader's lock connection is killed (the server ends the session, as when the process dies):
        # the leader fences itself at once and the standby takes over
        killed_at = time.monotonic()
        assert pg_server.terminate(pg_db, "inferbot-leader:a:1") == 1
        await until(lambda: a.lost, 5, "the old leader to step down")
        await until(lambda: b.elected, 15, "the standby to take over")
        assert a.lost[0] - killed_at < 2.0  # fencing: no scheduling after the session is gone
        assert b.elected[0] - killed_at < 15.0
        assert a.lost[0] <= b.elected[0] + 0.5
        await asyncio.sleep(1.0)  # a reconnects as a standby: still exactly one leader
        assert (a.leader.role, b.leader.role) == ("standby", "leader")
        info = await current_leader(url)
        assert info is not None and info.replica == "b:2"
    finally:
        await a.leader.stop()
        await b.leader.stop()


class Partition:
    """A TCP relay between a replica and PostgreSQL that can be cut like a network partition: the replica's
    side goes silent (packets vanish, no reset), the server's side is dropped (the server has given up on
    the silent peer, as its keepalives would after ~8 s: here at once, to keep the test short)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.cut = False
        self._server: asyncio.Server | None = None
        self._upstreams: list[asyncio.StreamWriter] = []
        self._clients: list[asyncio.StreamWriter] = []
        self._closed = asyncio.Event()
        self.listen_port = 0

    async def start(self) -> Partition:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.listen_port = self._server.sockets[0].getsockname()[1]
        return self

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._clients.append(writer)
        up_r, up_w = await asyncio.open_connection("127.0.0.1", self.port)
        self._upstreams.append(up_w)

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, ConnectionError):
                while data := await src.read(65536):
                    if self.cut:
                        return
                    dst.write(data)
                    await dst.drain()

        await asyncio.gather(pump(reader, up_w), pump(up_r, writer))
        if self.cut:
            await self._closed.wait()  # silence towards the replica, never a reset (until the test ends)
        writer.close()

    def partition(self) -> None:
        self.cut = True
        for w in self._upstreams:
            w.close()

    async def stop(self) -> None:
        self._closed.set()
        for w in self._clients:
            w.close()
        if self._server is not None:
            self._server.close()


async def test_partitioned_leader_fences_itself_and_the_standby_takes_over(pg_server: PgServer,
                                                                          pg_db: str) -> None:
    relay = await Partition(pg_server.port).start()
    direct = make_url(pg_server.url(pg_db))
    via_relay = direct.set(port=relay.listen_port)
    a = Campaign(PgLeader(via_relay, replica="a:1", poll_s=0.3, ping_timeout_s=1.5))
    b = Campaign(PgLeader(direct, replica="b:2", poll_s=0.3))
    tasks: list[asyncio.Task[None]] = []
    try:
        await a.start()
        await until(lambda: a.elected, 10, "a leader")
        await b.start()
        await asyncio.sleep(0.8)
        assert (a.leader.role, b.leader.role) == ("leader", "standby")
        cut_at = time.monotonic()
        relay.partition()  # a is alive but can't reach the database; nothing tells it so
        await until(lambda: a.lost, 5, "the partitioned leader to fence itself")
        await until(lambda: b.elected, 15, "the standby to take over")
        assert a.lost[0] - cut_at <= 0.3 + 1.5 + 1.0  # one poll + the ping timeout (+ slack for a busy machine)
        assert b.elected[0] - cut_at < 15.0
        assert a.leader.role == "standby"  # and it stays one while it can't reach the database
        await asyncio.sleep(1.0)
        assert (a.leader.role, b.leader.role) == ("standby", "leader")
    finally:
        for t in tasks:
            t.cancel()
        await a.leader.stop()
        await b.leader.stop()
        await relay.stop()


async def test_store_connects_with_the_password_from_the_environment(pg_server: PgServer, pg_db: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.app import open_store

    cfg = BotConfig(state=StateSettings(url=pg_server.config_url(pg_db)))
    monkeypatch.setenv("INFERBOT_DB_PASSWORD", PASSWORD)
    store = open_store(cfg)
    assert await store.prepare() == SCHEMA_HEAD and store.is_postgres
    assert PASSWORD not in store.url and f"{USER}@" in store.describe()
    await store.close()
    monkeypatch.setenv("INFERBOT_DB_PASSWORD", "wrong-password")
    from bot.app import Runtime
    from bot.replicas import open_leadership
    from services.cluster import Cluster
    from services.node.ssh import NodePool

    pool = NodePool()
    rt = Runtime(config=cfg, pool=pool, cluster=Cluster(cfg, pool), store=open_store(cfg))
    problem = await open_leadership(rt)
    assert isinstance(problem, str) and "cannot open the state database (PostgreSQL inferbot@127.0.0.1" in problem
    assert "password authentication failed" in problem and "wrong-password" not in problem
    assert rt.store is not None
    await rt.store.close()
    await pool.close()


async def test_the_leader_picks_up_follows_others_started_and_fences_its_scheduler(pg_server: PgServer,
                                                                                   pg_db: str) -> None:
    from bot.app import Runtime
    from bot.scheduler import BotScheduler
    from handlers.notify import RecordingNotifier
    from services.cluster import Cluster
    from services.node.ssh import NodePool

    url = pg_server.url(pg_db)
    cfg = BotConfig(state=StateSettings(url=url))
    pool = NodePool()
    sched = BotScheduler(poll_s=0.2)  # one scheduler per process (bot.jobs)
    rt = Runtime(config=cfg, pool=pool, cluster=Cluster(cfg, pool), store=Store(url), notifier=RecordingNotifier(),
                 jobs=sched)
    other = Campaign(PgLeader(make_url(url), replica="other:2", poll_s=0.2))  # another replica's campaign
    standby_store = Store(url)  # what another replica's handlers write
    try:
        await sched.start(rt, watch=False, leadership=PgLeader(make_url(url), replica="r0:1", poll_s=0.2))
        await until(lambda: sched.leading, 10, "the scheduler to lead")
        await other.start()
        await asyncio.sleep(0.6)
        assert not other.elected
        # another replica recorded a follow (a restart confirmed there, where nothing is scheduled)...
        await standby_store.follows.upsert("gone@gpu-z", "gone", "gpu-z", "u.service", None, NOW, "unplanned")

        async def finished() -> bool:
            f = await standby_store.follows.get("gone@gpu-z")
            return f is not None and f.outcome == "gone"

        # ...and the leader's reconcile picks it up and runs it (the service is not in the config: "gone")
        for _ in range(100):
            if await finished():
                break
            await asyncio.sleep(0.1)
        assert await finished()
        assert "reconcile" in sched.job_ids()
        # fencing: the leader's lock session is killed; its scheduler stops before the other replica leads
        pg_server.terminate(pg_db, "inferbot-leader:r0:1")
        await until(lambda: not sched.leading, 5, "the old leader's scheduler to stop")
        await until(lambda: other.elected, 15, "the other replica to lead")
        assert not sched.leading and sched.leadership.role == "standby"
        sched.follow("x@y")  # a standby schedules nothing
        assert not sched.leading
    finally:
        await sched.shutdown()
        await other.leader.stop()
        await standby_store.close()
        assert rt.store is not None
        await rt.store.close()
        await pool.close()


async def test_a_restart_whose_runner_died_before_auditing_it_is_audited_once(make_cluster: object) -> None:
    """The replica that ran the restart command died before writing ``restart.executed``: whoever finishes
    following the load writes it, once."""
    from sqlalchemy import delete

    from handlers.notify import RecordingNotifier
    from services.store.schema import audit_log
    from tests.test_restart import bot, kimi_cluster, ready_in_both, request, set_profile
    from tests.test_restart import until as test_restart_until

    cluster = await kimi_cluster(make_cluster)  # type: ignore[arg-type]
    set_profile(cluster.sims["gpu-a"], seconds_per_shard=0.02)
    notifier = RecordingNotifier()
    async with bot(cluster.config, notifier=notifier) as b:
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        store = b.rt.store
        assert store is not None
        # what a replica killed between running the command and auditing it leaves behind
        def forget_executed() -> None:
            with store.db.write() as c:
                c.execute(delete(audit_log).where(audit_log.c.event == "restart.executed"))

        await store.db.run(forget_executed)
        await test_restart_until(ready_in_both(b), 60, "ready")
        await asyncio.sleep(0.5)
        executed = [e for e in await store.audit.recent(limit=50) if e.event == "restart.executed"]
    assert len(executed) == 1 and executed[0].request_id == rid and "stopped before writing it down" in \
        executed[0].detail
