"""``ssh``: the settings question asked of cheap nodes over the bot's warm pool, so the SSH layer (handshake once,
then one channel per question) is measured with the rest."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.common import read_vm_hwm_kib
from bench.profile_client.bot_setup import import_front_end, prepare_store, write_config
from bench.profile_client.cheap_nodes import start_cheap_nodes
from bench.profile_client.measuring import cpu_s, measure_loop, vm_rss_kib
from bench.profile_client.recording import recording_meta

if TYPE_CHECKING:
    from bot.app import Runtime
    from config.models import BotConfig


async def ssh(rec: Path, n: int, runs: int, state: str, profile_path: Path | None, question: str,
              trace: bool, connect_first: bool, fresh_db: bool, keep_previous: bool = False) -> dict[str, Any]:
    """Ask ``question`` of ``n`` cheap nodes over a warm pool; CPU per node per question, RSS."""
    from bench.warm_client import check_reply
    from bot.app import runtime
    from bot.dispatch import answer
    from config.loader import load_config
    from handlers.context import Asker

    front = import_front_end()
    meta = recording_meta(rec)
    work = Path(tempfile.mkdtemp(prefix="inferbot-ssh-"))
    os.chmod(work, 0o755)
    answer_file = work / "answer.out"
    shutil.copy(rec / f"settings-{state}.out", answer_file)
    nodes = start_cheap_nodes(n, answer_file, work)
    try:
        cfg = work / "inferbot.toml"
        write_config(cfg, n, nodes.hosts, str(nodes.key_file), str(nodes.known_hosts), work / "state", meta["unit"],
                     nodes.user)
        if not fresh_db:
            prepare_store(cfg)
        config = load_config(str(cfg))
        out: dict[str, Any] = {"mode": "ssh", "state": state, "nodes": n, "runs": runs,
                               "slack_front_end_imported": front}
        out["rss_before_kib"] = vm_rss_kib()
        async with runtime(config) as rt:
            asker = Asker(surface="json")
            last: list[object] = []

            async def one() -> None:
                if not keep_previous:
                    last.clear()  # a serving bot keeps no answer once it is posted
                last[:] = [await answer(question, rt.context(asker))]

            out["rss_runtime_open_kib"] = vm_rss_kib()
            await _warm_up(rt, config, one, trace, connect_first, out)
            out["warmup_error"] = check_reply(last[0], n)  # type: ignore[arg-type]
            _after_first_answer(trace, out)
            runs0 = rt.pool.runs
            m = await measure_loop(one, runs, profile_path)
            out["error"] = check_reply(last[0], n)  # type: ignore[arg-type]
            out["round_trips_per_node"] = (rt.pool.runs - runs0) / (n * runs)
            out["connects"] = rt.pool.connects
            out["cpu_ms_per_node"] = m.cpu_s * 1000 / (n * runs)
            out["sys_ms_per_node"] = m.sys_s * 1000 / (n * runs)
            out["wall_ms_per_question"] = m.wall_s * 1000 / runs
            out["rss_end_kib"] = vm_rss_kib()
        out["peak_rss_kib"] = read_vm_hwm_kib()
        return out
    finally:
        nodes.stop()
        shutil.rmtree(work, ignore_errors=True)


async def _warm_up(rt: Runtime, config: BotConfig, one: Callable[[], Awaitable[None]], trace: bool,
                   connect_first: bool, out: dict[str, Any]) -> None:
    """The first question, which opens the connections (or, ``connect_first``, the handshakes alone before it,
    to tell their memory from the first answer's); ``trace`` starts tracemalloc for it."""
    n = len(config.nodes)
    if trace:
        tracemalloc.start()
    if connect_first:
        c0 = cpu_s()
        await asyncio.gather(*(rt.pool._connection(node, 30.0) for node in config.nodes))
        out["connect_cpu_ms_per_node"] = (cpu_s() - c0) * 1000 / n
        out["rss_connected_kib"] = vm_rss_kib()
        out["hwm_connected_kib"] = read_vm_hwm_kib()
    c0, t0 = cpu_s(), time.perf_counter()
    await one()
    out["warmup_cpu_ms_per_node"] = (cpu_s() - c0) * 1000 / n
    out["warmup_wall_s"] = time.perf_counter() - t0


def _after_first_answer(trace: bool, out: dict[str, Any]) -> None:
    """Memory once the first answer is in; with ``trace``, where the warm-up's allocations went."""
    out["rss_after_first_answer_kib"] = vm_rss_kib()
    out["hwm_after_first_answer_kib"] = read_vm_hwm_kib()
    if trace:
        snap = tracemalloc.take_snapshot()
        out["traced_kib"] = tracemalloc.get_traced_memory()[0] // 1024
        out["top_allocations"] = [
            f"{s.size // 1024} KiB {s.count} blocks {s.traceback[0].filename}:{s.traceback[0].lineno}"
            for s in snap.statistics("lineno")[:15]]
        tracemalloc.stop()
