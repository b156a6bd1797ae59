"""Push, not poll (issue 26): the nodes' journals drive the notices, on the simulated node behind a real sshd.

Every poll here is an hour apart (``[watch] poll``, ``interval`` and ``safety_interval``): after the first
look of each, only a journal line can explain a notice. The simulated node's journal is followed by its own
``journalctl`` (``services/sim/bin/journal-json``: ``-o json``, cursors, ``--follow``, rotations), which
shares no code with inferbot's parsers. Timing bounds are correctness bounds (generous), not performance
checks: ``python -m bench`` measures those.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import pytest

from handlers import push as push_handlers
from handlers.notify import RecordingNotifier
from handlers.reply import Reply
from services.parse.journal import JournalEntry
from services.sim.node import SimNode
from services.sim.scenarios import KIMI_UNIT
from tests.conftest import MakeCluster, SimCluster
from tests.test_restart import NOTIFY, OPS, THREAD, Bot, access, bot, kimi, kimi_cluster, request, set_profile, until

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

POLLS_AN_HOUR_APART = {"poll": "1h", "interval": "1h", "safety_interval": "1h"}
PUSHED_WITHIN_S = 10.0
"""A pushed notice comes this soon after its journal line (the benchmark measures how soon: ~0.1-0.5 s)."""


class TimedNotifier(RecordingNotifier):
    """Records when each post was made (``time.time()``)."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[tuple[float, str]] = []

    async def post(self, channel: str, thread_ts: str | None, reply: Reply) -> str:
        ts = await super().post(channel, thread_ts, reply)
        self.times.append((time.time(), self.posts[-1].text))
        return ts

    def when(self, word: str) -> list[float]:
        return [t for t, text in self.times if word in text]


def journal_times(sim: SimNode, text: str, after: float = 0.0) -> list[float]:
    """When (epoch seconds) the node's journal got each line containing ``text`` (archives included)."""
    out = []
    for path in [*sorted(sim.state_dir.glob("journal@*.tsv")), sim.journal_path()]:
        # Bytes, not read_text(): universal newlines would cut a line at tqdm's \r.
        for line in path.read_bytes().decode(errors="replace").split("\n"):
            f = line.split("\t")
            if len(f) >= 5 and text in f[4] and int(f[0]) / 1e6 > after:
                out.append(int(f[0]) / 1e6)
    return out


async def _pushed(make_cluster: MakeCluster, watch: dict[str, object] | None = None, **unit: object) -> SimCluster:
    return await kimi_cluster(make_cluster, scenario=kimi(**unit) if unit else None,
                              access_=access(cooldown="0s"), watch=POLLS_AN_HOUR_APART | (watch or {}))


async def _streaming(b: Bot) -> None:
    """Until the leader's journal stream of gpu-a is open (and the watcher's first look has its baselines)."""
    push = b.scheduler.push
    assert push is not None
    await until(lambda: "gpu-a" in push.journals and push.journals["gpu-a"].connected, 20, "the journal stream")
    await until(lambda: push._looked.get("gpu-a") is not None, 20, "the watcher's first look")
    await asyncio.sleep(0.3)


def once(n: RecordingNotifier, word: str, channel: str, thread: str | None = None) -> bool:
    return len([t for t in n.texts(channel, thread) if word in t]) == 1


async def test_the_ready_notice_is_pushed_by_the_journal_not_the_poll(make_cluster: MakeCluster) -> None:
    cluster = await _pushed(make_cluster)
    sim = cluster.sims["gpu-a"]
    set_profile(sim, seconds_per_shard=0.03)  # a few seconds of load: the follow's first poll sees it loading
    notifier = TimedNotifier()
    async with bot(cluster.config, watch=True, notifier=notifier) as b:
        await _streaming(b)
        t0 = time.time()
        rid = await request(b)
        assert (await b.click("restart_confirm", rid)).executed
        await until(lambda: bool(notifier.when("is ready")), 60, "the ready notice")
        await asyncio.sleep(1.0)
        assert once(notifier, "is ready", OPS, THREAD) and once(notifier, "is ready", NOTIFY)
        (line_at,) = journal_times(sim, "Application startup complete.", after=t0)
        # The follow's only poll saw the load going on: the ✅ came from the journal's line.
        assert [p for p in notifier.posts if "kimi on gpu-a:" in p.reply.title or "loading" in p.text]
        assert all(line_at <= at < line_at + PUSHED_WITHIN_S for at in notifier.when("is ready"))


async def test_a_crash_is_said_at_the_exit_line_whatever_restart_sec(make_cluster: MakeCluster) -> None:
    cluster = await _pushed(make_cluster, restart_sec=20)  # systemd waits 20 s before starting it again
    sim = cluster.sims["gpu-a"]
    notifier = TimedNotifier()
    async with bot(cluster.config, watch=True, notifier=notifier) as b:
        await _streaming(b)
        t0 = time.time()
        await sim.crash(KIMI_UNIT)
        await until(lambda: bool(notifier.when("restarted (not by inferbot)")), 15, "the crash notice")
        (exited,) = journal_times(sim, "Main process exited", after=t0)
        (said,) = notifier.when("restarted (not by inferbot)")
        assert exited <= said < exited + PUSHED_WITHIN_S
        assert not journal_times(sim, "Scheduled restart job", after=t0)  # said before systemd restarted it
        # Then systemd starts it again and the load it follows ends in one ✅, pushed too.
        await until(lambda: bool(notifier.when("is ready")), 60, "the ready notice after the crash")
        await asyncio.sleep(1.0)
        assert once(notifier, "restarted (not by inferbot)", NOTIFY) and once(notifier, "is ready", NOTIFY)
        assert not [t for t in notifier.texts(NOTIFY) if "failed" in t]
        events = [e.event for e in await b.rt.store.audit.recent(limit=20)]  # type: ignore[union-attr]
        assert events.count("restart.unplanned") == 1


async def test_an_engine_death_with_exit_0_is_said_at_once(make_cluster: MakeCluster,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # After an engine's death the health watcher looks again a while later (2 s; 30 s here): that wait must
    # not hold back the "Deactivated" line that follows the death by a moment (found by the benchmark).
    monkeypatch.setattr(push_handlers, "HEALTH_RECHECK_S", 30.0)
    cluster = await _pushed(make_cluster)
    sim = cluster.sims["gpu-a"]
    set_profile(sim, engine_death_exit=0)
    await sim.restart_unit(KIMI_UNIT)
    await sim.wait_for(KIMI_UNIT, "ready", 45)
    notifier = TimedNotifier()
    async with bot(cluster.config, watch=True, notifier=notifier) as b:
        await _streaming(b)
        t0 = time.time()
        sim.set_live(KIMI_UNIT, die=True)
        await until(lambda: bool(notifier.when("stopped unexpectedly")), 15, "the ❌ stopped unexpectedly")
        (deactivated,) = journal_times(sim, "Deactivated successfully.", after=t0)
        (said,) = notifier.when("stopped unexpectedly")
        assert deactivated <= said < deactivated + PUSHED_WITHIN_S
        await asyncio.sleep(1.0)
        assert once(notifier, "stopped unexpectedly (exit 0 after EngineDeadError)", NOTIFY)


def _session_processes(sim: SimNode, pattern: bytes) -> list[int]:
    """The processes of the bot's SSH sessions on ``sim`` whose command line holds ``pattern``."""
    root = str(sim.root).encode()
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes()
            env = (d / "environ").read_bytes()
        except OSError:
            continue
        if pattern in argv and root in env:
            found.append(int(d.name))
    return found


def stream_processes(sim: SimNode) -> list[int]:
    """The node's ``journalctl --follow`` (the simulator's: its json helper)."""
    return _session_processes(sim, b"journal-json")


async def test_one_process_on_the_node_follows_every_unit_and_ends_with_the_stream(make_cluster: MakeCluster) -> None:
    cluster = await _pushed(make_cluster)
    sim = cluster.sims["gpu-a"]
    async with bot(cluster.config, watch=True) as b:
        await _streaming(b)
        assert len(stream_processes(sim)) == 1
    await until(lambda: not stream_processes(sim), 10, "the node's journalctl to end with its channel")


def _kill_connections(cluster: SimCluster) -> None:
    """SIGKILL the node's sshd processes serving connections (the listener stays): every channel drops."""
    listener = cluster.sshds["gpu-a"].proc.pid
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rpartition(")")[2].split()[1])
            except (OSError, ValueError):
                continue
            if ppid == listener:
                os.kill(int(d.name), signal.SIGKILL)


async def test_a_dropped_connection_loses_nothing_and_says_nothing_twice(make_cluster: MakeCluster) -> None:
    cluster = await _pushed(make_cluster, restart_sec=2)
    sim = cluster.sims["gpu-a"]
    notifier = TimedNotifier()
    async with bot(cluster.config, watch=True, notifier=notifier) as b:
        await _streaming(b)
        push = b.scheduler.push
        assert push is not None
        journal = push.journals["gpu-a"]
        opens = journal.opens
        (old,) = stream_processes(sim)
        os.kill(old, signal.SIGKILL)  # the node's journalctl dies: its channel ends
        await until(lambda: journal.opens > opens and journal.connected, 15, "the stream to open again")
        _kill_connections(cluster)  # now the whole SSH connection
        await sim.crash(KIMI_UNIT)  # ...and the unit crashes while it is down
        await until(lambda: bool(notifier.when("restarted (not by inferbot)")), 30, "the crash notice")
        await until(lambda: bool(notifier.when("is ready")), 60, "the ready notice after the crash")
        await asyncio.sleep(1.5)
        assert journal.opens >= opens + 2
        assert once(notifier, "restarted (not by inferbot)", NOTIFY) and once(notifier, "is ready", NOTIFY)
        assert len(stream_processes(sim)) == 1  # the old streams left nothing behind


def _handled(b: Bot) -> list[str]:
    """The messages of every journal entry the leader's stream of gpu-a hands over from now on."""
    push = b.scheduler.push
    assert push is not None
    journal = push.journals["gpu-a"]
    seen: list[str] = []
    real = journal._deliver

    async def recording(entries: list[JournalEntry]) -> None:
        seen.extend(e.message for e in entries)
        await real(entries)

    journal._deliver = recording
    return seen


async def test_a_rotation_and_a_vacuum_while_the_stream_is_down_lose_nothing(make_cluster: MakeCluster) -> None:
    cluster = await _pushed(make_cluster, restart_sec=1)
    sim = cluster.sims["gpu-a"]
    sshd = cluster.sshds["gpu-a"]
    notifier = TimedNotifier()
    async with bot(cluster.config, watch=True, notifier=notifier) as b:
        await _streaming(b)
        handled = _handled(b)
        sim.rotate_journal()  # while the stream reads: it goes on in the new file
        sim.log_line(KIMI_UNIT, "(APIServer pid=1) ERROR 12-05 02:00:00 [core.py:1] EngineDeadError: after a rotation")
        await until(lambda: any("after a rotation" in m for m in handled), 15, "the line after the rotation")
        sshd.proc.send_signal(signal.SIGSTOP)  # the node stops answering new connections...
        _kill_connections(cluster)  # ...and the open one drops: the stream is down
        try:
            await sim.crash(KIMI_UNIT)
            await until(lambda: bool(journal_times(sim, "Scheduled restart job")), 15, "systemd's restart")
            sim.rotate_journal()
            sim.vacuum_journal(keep=0)  # the file holding the crash is gone from the disk too
            assert not list(sim.state_dir.glob("journal@*.tsv"))
            sim.rotate_journal()  # the crash's lines are in this archive
        finally:
            sshd.proc.send_signal(signal.SIGCONT)
        await until(lambda: bool(notifier.when("restarted (not by inferbot)")), 60, "the crash notice")
        await until(lambda: bool(notifier.when("is ready")), 60, "the ready notice after the crash")
        await asyncio.sleep(1.0)
        assert once(notifier, "restarted (not by inferbot)", NOTIFY) and once(notifier, "is ready", NOTIFY)
        # Read from the cursor on: the crash's exit line (now in an archive) once, and nothing from before it.
        assert len([m for m in handled if "Main process exited" in m]) == 1
        assert len([m for m in handled if "after a rotation" in m]) == 1


async def test_a_node_reboot_loses_nothing_and_says_each_thing_once(make_cluster: MakeCluster) -> None:
    cluster = await _pushed(make_cluster)
    sim = cluster.sims["gpu-a"]
    sshd = cluster.sshds["gpu-a"]
    notifier = TimedNotifier()
    async with bot(cluster.config, watch=True, notifier=notifier) as b:
        await _streaming(b)
        handled = _handled(b)
        sshd.proc.send_signal(signal.SIGSTOP)  # the node goes down: nothing answers...
        _kill_connections(cluster)  # ...and the stream's connection drops
        booted: SimNode | None = None
        try:
            await sim.stop()  # every process of the node dies, none says so (power lost)...
            for pid in stream_processes(sim):  # ...its journalctl too
                os.kill(pid, signal.SIGKILL)
            sim.next_boot()
            booted = SimNode(sim.root, sim.sc, run_as=sim.run_as)  # the same disk, a new boot
            await booted.start()  # its unit starts on boot and loads while the node is still unreachable
            await booted.wait_for(KIMI_UNIT, "ready", 45)
            sshd.proc.send_signal(signal.SIGCONT)
            await until(lambda: bool(notifier.when("restarted (not by inferbot)")), 90, "the reboot's notice")
            await until(lambda: any("Application startup complete." in m for m in handled), 30, "the boot's lines")
            await asyncio.sleep(1.5)
            assert once(notifier, "restarted (not by inferbot)", NOTIFY)
            # Resumed from the cursor across the boot: the new boot's start read once, nothing of the old boot again.
            started = [m for m in handled if m.startswith("Started vLLM")]
            assert len(started) == 1, handled
            assert len([m for m in handled if "Application startup complete." in m]) == 1
        finally:
            sshd.proc.send_signal(signal.SIGCONT)
            if booted is not None:
                await booted.stop()


async def test_a_bot_restarted_mid_load_resumes_from_its_cursor(make_cluster: MakeCluster) -> None:
    cluster = await _pushed(make_cluster)
    sim = cluster.sims["gpu-a"]
    set_profile(sim, seconds_per_shard=0.05)  # ~6 s of load
    notifier = TimedNotifier()  # the Slack channel both processes post to
    async with bot(cluster.config, watch=True, notifier=notifier) as first:
        await _streaming(first)
        rid = await request(first)
        assert (await first.click("restart_confirm", rid)).executed
        await until(lambda: any("kimi on gpu-a:" in p.reply.title for p in notifier.posts), 30, "progress")
        store = first.rt.store
        assert store is not None
        push = first.scheduler.push
        assert push is not None
        await until(lambda: push.journals["gpu-a"].handed > 0, 15, "the stream to hand over the restart's lines")
    # Stopped mid-load: its cursor is in the store; the load ends while no bot runs.
    async with bot(cluster.config, watch=False, notifier=notifier) as probe:
        kept = await probe.rt.store.journal_cursors.get("gpu-a")  # type: ignore[union-attr]
    assert kept is not None
    await sim.wait_for(KIMI_UNIT, "ready", 60)
    ready_line = journal_times(sim, "Application startup complete.")[-1]
    assert not notifier.when("is ready")
    async with bot(cluster.config, watch=True, notifier=notifier) as second:
        handled = _handled(second)
        await until(lambda: bool(notifier.when("is ready")), 30, "the ready notice")
        await until(lambda: any("Application startup complete." in m for m in handled), 15, "the missed line")
        await asyncio.sleep(1.0)
        assert once(notifier, "is ready", OPS, THREAD) and once(notifier, "is ready", NOTIFY)
        # The new process read what was written after the cursor, and nothing before it a second time.
        assert [m for m in handled if "Application startup complete." in m] == [
            f"(APIServer pid={sim.state(KIMI_UNIT).main_pid}) INFO:     Application startup complete."]
        assert all(at >= ready_line for at in notifier.when("is ready"))


async def test_a_silent_stream_is_found_by_the_poll_and_opened_again(make_cluster: MakeCluster) -> None:
    cluster = await kimi_cluster(make_cluster, scenario=kimi(restart_sec=1), access_=access(cooldown="0s"),
                                 watch={"poll": "1h", "interval": "0.5s", "safety_interval": "1s"})
    sim = cluster.sims["gpu-a"]
    notifier = TimedNotifier()
    async with bot(cluster.config, watch=True, notifier=notifier) as b:
        await _streaming(b)
        push = b.scheduler.push
        assert push is not None
        journal = push.journals["gpu-a"]
        opens = journal.opens
        handled = _handled(b)
        (stream,) = stream_processes(sim)
        os.kill(stream, signal.SIGSTOP)  # the channel stays open, the node's journalctl says nothing more
        try:
            await sim.crash(KIMI_UNIT)
            await until(lambda: push.silent_restarts >= 1, 30, "the poll to find the stream silent")
            await until(lambda: journal.opens > opens and journal.connected, 15, "the stream to open again")
            await until(lambda: any("Application startup complete." in m for m in handled), 30,
                        "the new stream's lines")
        finally:
            os.kill(stream, signal.SIGKILL)
        await until(lambda: bool(notifier.when("is ready")), 30, "the ready notice")
        await asyncio.sleep(1.0)
        assert once(notifier, "restarted (not by inferbot)", NOTIFY) and once(notifier, "is ready", NOTIFY)
        # What the stopped stream had not said came with the new one, from where it had got to.
        assert len([m for m in handled if "Main process exited" in m]) == 1
