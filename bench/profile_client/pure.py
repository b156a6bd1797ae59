"""``pure``: the whole question through ``bot.dispatch.answer`` with a pool that hands back the recording (no SSH):
what is left is the client's own work per node."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.common import read_vm_hwm_kib
from bench.profile_client.bot_setup import import_front_end, prepare_store, write_config
from bench.profile_client.measuring import measure_loop, vm_rss_kib
from bench.profile_client.recording import recording_meta


async def pure(rec: Path, n: int, runs: int, state: str, render: bool, profile_path: Path | None,
               with_store: bool, question: str, fresh_db: bool) -> dict[str, Any]:
    """Ask ``question`` of ``n`` nodes whose pool hands back the recorded answer; CPU per node per question."""
    from bench.warm_client import check_reply
    from bot.app import runtime
    from bot.dispatch import answer
    from bot.render_text import render_text
    from config.loader import load_config
    from config.models import Node
    from handlers.context import Asker
    from services.models import CommandResult

    front = import_front_end()
    meta = recording_meta(rec)
    stdout = (rec / f"settings-{state}.out").read_text()
    work = Path(tempfile.mkdtemp(prefix="inferbot-pure-"))
    try:
        cfg = work / "inferbot.toml"
        (work / "kh").write_text("")
        write_config(cfg, n, None, "", str(work / "kh"), work / "state", meta["unit"])
        if not fresh_db:
            prepare_store(cfg)
        config = load_config(str(cfg))
        rss0 = vm_rss_kib()
        async with runtime(config, with_store=with_store) as rt:
            async def fake_run(node: Node, command: str, limit_s: float | None = None, stdin: str | None = None,
                               wait_s: float | None = None, read_only: bool = False) -> CommandResult:
                rt.pool.runs += 1
                return CommandResult(exit_status=0, stdout=stdout, stderr="", elapsed_s=0.01)

            rt.pool.run = fake_run  # type: ignore[method-assign]
            asker = Asker(surface="json")
            last: list[object] = []

            async def one() -> None:
                reply = await answer(question, rt.context(asker))
                if render:
                    json.dumps(reply.to_json(render_text(reply)), ensure_ascii=False)
                last[:] = [reply]

            await one()  # warm: caches, the store's tables
            why = check_reply(last[0], n)  # type: ignore[arg-type]
            m = await measure_loop(one, runs, profile_path)
        return {"mode": "pure", "state": state, "nodes": n, "runs": runs, "render": render, "store": with_store,
                "slack_front_end_imported": front, "cpu_ms_per_node": m.cpu_s * 1000 / (n * runs),
                "sys_ms_per_node": m.sys_s * 1000 / (n * runs), "wall_ms_per_question": m.wall_s * 1000 / runs,
                "error": why, "rss_kib_start": rss0, "peak_rss_kib": read_vm_hwm_kib()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
