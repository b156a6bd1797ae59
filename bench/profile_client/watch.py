"""``watch``: the bot's CPU per watcher poll (``bot.jobs.watch_node_job``), called directly or from a real
``BotScheduler``, on recorded answers whose token counters move on every poll."""

from __future__ import annotations

import asyncio
import contextlib
import cProfile
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import read_vm_hwm_kib
from bench.profile_client.bot_setup import import_front_end, write_config
from bench.profile_client.cheap_nodes import start_cheap_nodes
from bench.profile_client.measuring import cpu_s, measure_loop, sys_s, thread_cpu_s
from bench.profile_client.recording import Traffic, recording_meta, session_answer

if TYPE_CHECKING:
    from bot.app import Runtime
    from handlers.notify import RecordingNotifier


async def watch(rec: Path, n: int, seconds: float, interval: float, state: str, via_ssh: bool,
                direct: int, profile_path: Path | None, traffic: bool = True) -> dict[str, Any]:
    """The bot's CPU per watcher poll (one node, one service), as the leader's scheduler runs it.

    Scheduled (default): a real ``BotScheduler`` on SQLite polls ``n`` nodes every ``interval`` s for ``seconds``
    s (after one round to warm up); CPU of this process / polls made. That includes APScheduler, the probe, the
    store and the health checks. The leader asks on one persistent session per node (``NodePool.ask``): with
    ``--ssh`` the cheap nodes answer it once per newline, as the bot's session loop does.
    ``direct``: call ``bot.jobs.watch_node_job`` that many times for one node instead (no APScheduler).
    """
    from bot.app import runtime
    from config.loader import load_config
    from handlers.notify import RecordingNotifier

    import_front_end()
    unit = recording_meta(rec)["unit"]
    stdout = (rec / f"watch-{state}.out").read_text()
    work = Path(tempfile.mkdtemp(prefix="inferbot-watch-"))
    os.chmod(work, 0o755)
    with contextlib.ExitStack() as cleanup:  # on the way out: the rewriting stopped, the nodes, the directory
        cleanup.callback(shutil.rmtree, work, ignore_errors=True)
        if via_ssh:
            await _serve_from_cheap_nodes(rec / f"watch-{state}.out", stdout, n, work, unit, traffic, cleanup)
        else:
            (work / "kh").write_text("")
            write_config(work / "inferbot.toml", n, None, "", str(work / "kh"), work / "state", unit)
        config = load_config(str(work / "inferbot.toml"))
        out: dict[str, Any] = {"mode": "watch", "state": state, "nodes": n, "ssh": via_ssh, "traffic": traffic}
        async with runtime(config) as rt:
            if not via_ssh:
                _answer_from_recording(rt, stdout, traffic)
            notifier = RecordingNotifier()
            if direct:
                out |= await _poll_directly(rt, notifier, config.nodes[0].name, direct, profile_path)
            else:
                out |= await _poll_scheduled(rt, notifier, interval, seconds, profile_path)
            out["posts"] = len(notifier.posts)
            out["connects"] = rt.pool.connects
            out["session_opens"] = rt.pool.session_opens
        out["peak_rss_kib"] = read_vm_hwm_kib()
        return out


async def _serve_from_cheap_nodes(recorded: Path, stdout: str, n: int, work: Path, unit: str, traffic: bool,
                                  cleanup: contextlib.ExitStack) -> None:
    """Cheap nodes answering with the recording (``traffic``: its counters moving) and the config to ask them."""
    answer_file = work / "answer.out"
    session_file = work / "answer.out.session"
    shutil.copy(recorded, answer_file)
    session_file.write_text(session_answer(stdout))
    os.chmod(session_file, 0o644)
    nodes = start_cheap_nodes(n, answer_file, work)
    cleanup.callback(nodes.stop)
    if traffic:  # the nodes' counters move: the answer files are rewritten twice a second
        rewriting = asyncio.ensure_future(_keep_writing(Traffic(stdout), work, answer_file, session_file))
        cleanup.callback(rewriting.cancel)
    write_config(work / "inferbot.toml", n, nodes.hosts, str(nodes.key_file), str(nodes.known_hosts),
                 work / "state", unit, nodes.user)
    from bench.contenders import watch_commands

    # The session's command (the same for every node here) loops on the cheap nodes.
    sent = await asyncio.to_thread(watch_commands, str(work / "inferbot.toml"), True)  # its own loop
    for command, _stdin in set(sent.values()):
        (work / f"answer.out.loop-{len(command.encode())}").write_text("")


async def _keep_writing(writer: Traffic, work: Path, answer_file: Path, session_file: Path) -> None:
    """Rewrite the one-shot and the session answer with the next poll's counters, twice a second, for ever."""
    while True:
        text = writer.next()
        for path, body in ((answer_file, text), (session_file, session_answer(text))):
            tmp = work / "answer.tmp"
            tmp.write_text(body)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        await asyncio.sleep(0.5)


def _answer_from_recording(rt: Runtime, stdout: str, traffic: bool) -> None:
    """Replace the pool's one-shot commands and the leader's persistent session by the recording (no SSH)."""
    from config.models import Node
    from services.models import CommandResult
    from services.node.ssh import AnswerEnd

    busy = Traffic(stdout) if traffic else None

    async def fake_run(node: Node, command: str, limit_s: float | None = None, stdin: str | None = None,
                       wait_s: float | None = None, read_only: bool = False) -> CommandResult:
        rt.pool.runs += 1
        text = busy.next() if busy is not None else stdout
        return CommandResult(exit_status=0, stdout=text, stderr="", elapsed_s=0.01)

    async def fake_ask(node: Node, command: str, end: AnswerEnd, limit_s: float | None = None,
                       wait_s: float | None = None) -> CommandResult:
        return await fake_run(node, command, limit_s)

    rt.pool.run = fake_run  # type: ignore[method-assign]
    rt.pool.ask = fake_ask  # type: ignore[method-assign]  # the leader's persistent session


async def _poll_directly(rt: Runtime, notifier: RecordingNotifier, node: str, polls: int,
                         profile_path: Path | None) -> dict[str, Any]:
    """``bot.jobs.watch_node_job`` for ``node``, ``polls`` times after three unmeasured ones (no APScheduler)."""
    from bot import jobs
    from bot.scheduler import BotScheduler

    sched = BotScheduler(watch_s=3600)
    await sched.start(rt.with_ports(notifier=notifier, jobs=sched), watch=False)
    for _ in range(3):  # baseline, first samples
        await jobs.watch_node_job(node)
    runs0 = rt.pool.runs

    async def one() -> None:
        await jobs.watch_node_job(node)

    m = await measure_loop(one, polls, profile_path)
    made = rt.pool.runs - runs0
    await sched.shutdown()
    return {"polls": made, "cpu_ms_per_poll": m.cpu_s * 1000 / max(1, made),
            "wall_ms_per_poll": m.wall_s * 1000 / max(1, made)}


async def _poll_scheduled(rt: Runtime, notifier: RecordingNotifier, interval: float, seconds: float,
                          profile_path: Path | None) -> dict[str, Any]:
    """A real ``BotScheduler`` polling every node each ``interval`` s, measured for ``seconds`` after one round."""
    from bot.scheduler import BotScheduler

    sched = BotScheduler(watch_s=interval)
    await sched.start(rt.with_ports(notifier=notifier, jobs=sched), watch=True)
    await asyncio.sleep(interval * 1.5)  # every node polled once: baselines, connections
    runs0, c0, t0 = rt.pool.runs, cpu_s(), time.perf_counter()
    s0 = sys_s()
    th0 = thread_cpu_s()
    prof = cProfile.Profile() if profile_path else None
    if prof is not None:
        prof.enable()
    await asyncio.sleep(seconds)
    if prof is not None and profile_path is not None:
        prof.disable()
        prof.dump_stats(str(profile_path))
    cpu, wall = cpu_s() - c0, time.perf_counter() - t0
    polls = rt.pool.runs - runs0
    await sched.shutdown()
    sys_used = sys_s() - s0
    th1 = thread_cpu_s()
    # Which threads spent it (the event loop's, the store's database thread, …): ms per poll.
    by_thread = {k: round((v - th0.get(k, 0.0)) * 1000 / max(1, rt.pool.runs - runs0), 3)
                 for k, v in th1.items() if v - th0.get(k, 0.0) > 0}
    return {"thread_ms_per_poll": by_thread, "polls": polls, "seconds": wall,
            "cpu_ms_per_poll": cpu * 1000 / max(1, polls), "sys_ms_per_poll": sys_used * 1000 / max(1, polls),
            "core_pct": 100 * cpu / wall, "core_pct_at_512_every_15s": cpu * 1000 / max(1, polls) * 512 / 15 / 10}
