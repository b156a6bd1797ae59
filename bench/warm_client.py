"""inferbot warm: the long-running bot's path in its own process, connections pooled, asked many times.

    python -m bench.warm_client --config FILE --runs 10

Builds ``runtime(config)`` once (as ``inferbot serve`` does), asks one warm-up question (it opens the N
connections), then asks ``--runs`` more, each timed. Each question is answered as the Slack front end
answers it: the reply built for the Slack surface without the per-service data the Slack front end never shows
(``service_data=False``), then rendered into the Slack messages it would post (``render_messages``). Prints
one JSON object: wall per question (until the answer is built: every node's output read and made into cards,
what the OpenSSH baselines' wall covers), the render's
wall after it (``render_s``), this process's CPU time (user+sys) per node per question for the answer and,
apart, for the render (``render_cpu_ms_per_node``), SSH round trips per node per question
(``pool.runs`` / N, must be 1), connections made (``pool.connects``, must be N), peak RSS (VmHWM), and a
digest of the commands the bot really sent (the baselines must send the same). The Slack front end's and
the scheduler's modules are imported first, so the RSS is that of the bot process (``inferbot serve``), not
of a slimmer one; each answer is dropped once rendered, as the bot drops an answer once posted, so the peak
is not that of two answers at once. The state database is created (or upgraded) first by a child process,
as a bot restarted on its database finds it; ``--new-store`` starts on a new one instead (a first start:
``inferbot serve``'s start, ``bot.replicas.open_leadership``, has a helper process create it).
``alembic_imported`` says whether Alembic ended up in the measured process (it should not).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import logging
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

from bench.common import QUESTION, command_digest, raise_nofile, read_vm_hwm_kib
from bot.app import Runtime, runtime
from bot.dispatch import answer
from config.loader import load_config
from config.models import Node
from handlers.context import Asker
from handlers.reply import Reply
from services.models import CommandResult


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class _Failures(logging.Handler):
    """Keeps the last line of each traceback the dispatcher logs (why a question failed)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.seen: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            e = record.exc_info[1]
            self.seen.append(f"{type(e).__name__}: {e}")

    def last(self) -> str:
        """`` (the last failure)`` to add to a reason, or "" when nothing failed."""
        return f" ({self.seen[-1]})" if self.seen else ""


SERVE_MODULES = ("bot.slack.serve", "bot.replicas", "bot.slack.app", "bot.scheduler", "bot.slack.poster",
                 "bot.slack.home", "slack_bolt.adapter.socket_mode.async_handler")
"""What ``inferbot serve`` imports (``bot.slack.serve`` and what it imports as it starts)."""


def _import_front_end() -> bool:
    """Load the modules ``inferbot serve`` loads (the Slack front end, the scheduler, the store's leadership),
    so peak RSS is that of the bot process."""
    try:
        for name in SERVE_MODULES:
            importlib.import_module(name)
    except Exception:
        return False
    return True


def _posted(reply: Reply) -> int:
    """What the Slack front end does with an answer before posting it: its messages (how many)."""
    from bot.slack.blocks import render_messages

    return len(render_messages(reply, attachments=False))


def check_reply(reply: Reply, n_nodes: int, extra: str = "") -> str | None:
    """Why ``reply`` is not a full settings answer from every node (None when it is).

    A Slack answer carries no per-service data (only the cards): every node answering is the check there,
    as a service is unreachable only when its node is.
    """
    data = reply.data or {}
    nodes = data.get("nodes", [])
    bad = [n["node"] for n in nodes if not n.get("ok")]
    if reply.intent != "settings" or not reply.ok:
        return f"intent {reply.intent}, ok {reply.ok}: {reply.error}{extra}"
    if len(nodes) != n_nodes or bad:
        return f"{len(nodes)} nodes answered, unreachable: {bad[:5]}"
    unreachable = [s["service"] for s in data.get("services", []) if s.get("state") == "unreachable"]
    if unreachable:
        return f"services unreachable: {unreachable[:5]}"
    return None


def prepare_store(config_path: str) -> None:
    """Create or upgrade the state database in a child process, as the bot's previous run would have: a bot
    restarted on its database does not import Alembic, one starting on a new database does (once)."""
    code = ("import asyncio, sys; from bot.app import open_store; from config.loader import load_config\n"
            "async def main():\n"
            "    store = open_store(load_config(sys.argv[1]))\n"
            "    await store.prepare()\n"
            "    await store.close()\n"
            "asyncio.run(main())\n")
    subprocess.run([sys.executable, "-c", code, config_path], check=True)


async def measure(config_path: str, runs: int, question: str, new_store: bool = False) -> dict[str, Any]:
    """Ask ``question`` once to warm up, then ``runs`` times, and report what it cost (``new_store``: on a new
    SQLite state database in a directory of its own)."""
    config = load_config(config_path)
    if new_store and not config.state.url:
        fresh = tempfile.mkdtemp(prefix="inferbot-bench-state-")
        config = config.model_copy(update={"state": config.state.model_copy(update={"dir": fresh})})
    n = len(config.nodes)
    out: dict[str, Any] = {"nodes": n, "runs": runs, "wall_s": [], "render_s": [], "cpu_ms_per_node": [],
                           "render_cpu_ms_per_node": [], "new_store": new_store,
                           "round_trips_per_node": [], "run_errors": [], "errors": []}
    failures = _Failures()
    logging.getLogger("inferbot").addHandler(failures)
    out["slack_front_end_imported"] = _import_front_end()
    out["rss_before_first_question_kib"] = read_vm_hwm_kib()
    async with runtime(config) as rt:
        from bot.replicas import open_leadership

        # As `inferbot serve` starts: the schema checked, and created or upgraded by a helper process.
        leadership = await open_leadership(rt)
        if isinstance(leadership, str):
            out["errors"].append(leadership)
            return out
        out["alembic_imported"] = "alembic" in sys.modules
        asker = Asker(surface="slack")
        # A serving bot posts an answer and drops it: each answer lives only in the call that asks it, since
        # holding the warm-up answer or the previous one while the next is built would add one or two whole
        # answers to the peak RSS that the bot never has.
        await _warm_up(rt, asker, question, failures, out)
        out["connects_after_warmup"] = rt.pool.connects
        for _ in range(runs):
            await _measured_question(rt, asker, question, failures, out)
        out["connects"] = rt.pool.connects
    out["peak_rss_kib"] = read_vm_hwm_kib()
    return out


async def _warm_up(rt: Runtime, asker: Asker, question: str, failures: _Failures, out: dict[str, Any]) -> None:
    """The first question: it opens the connections, and what the bot sends is recorded (its digest)."""
    n = len(rt.config.nodes)
    sent: dict[str, str] = {}
    real_run = rt.pool.run

    async def recording_run(node: Node, command: str, *a: Any, **kw: Any) -> CommandResult:
        sent[node.name] = command
        return await real_run(node, command, *a, **kw)

    rt.pool.run = recording_run  # type: ignore[method-assign]  # warm-up only: what the bot sends
    t0, c0 = time.perf_counter(), _cpu_s()
    first = await answer(question, rt.context(asker, service_data=False))
    rt.pool.run = real_run  # type: ignore[method-assign]
    if (why := check_reply(first, n, failures.last())) is None:
        out["messages"] = _posted(first)
    out["command_digest"] = command_digest(sent)
    out["warmup_wall_s"] = time.perf_counter() - t0
    out["warmup_cpu_ms_per_node"] = (_cpu_s() - c0) * 1000 / n
    if why is not None:
        out["errors"].append(f"warm-up: {why}")
    out["warmup_error"] = why


async def _measured_question(rt: Runtime, asker: Asker, question: str, failures: _Failures,
                             out: dict[str, Any]) -> None:
    """One timed question, answered and rendered as the Slack front end does; its costs appended to ``out``."""
    n = len(rt.config.nodes)
    runs0 = rt.pool.runs
    c0 = _cpu_s()
    t0 = time.perf_counter()
    reply = await answer(question, rt.context(asker, service_data=False))
    wall = time.perf_counter() - t0
    cpu = _cpu_s() - c0
    why = check_reply(reply, n, failures.last())
    if why is None:
        _posted(reply)
    out["render_s"].append(time.perf_counter() - t0 - wall)
    out["render_cpu_ms_per_node"].append((_cpu_s() - c0 - cpu) * 1000 / n)
    out["wall_s"].append(wall)
    out["cpu_ms_per_node"].append(cpu * 1000 / n)
    out["round_trips_per_node"].append((rt.pool.runs - runs0) / n)
    out["run_errors"].append(why)
    if why is not None:
        out["errors"].append(why)


def main() -> int:
    """Entry point of ``python -m bench.warm_client``."""
    p = argparse.ArgumentParser(prog="python -m bench.warm_client", description=__doc__.splitlines()[0])
    p.add_argument("--config", required=True)
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--question", default=QUESTION)
    p.add_argument("--new-store", action="store_true",
                   help="leave a new state database to this process (measures a first start: Alembic's import)")
    args = p.parse_args()
    raise_nofile()
    if not args.new_store:
        prepare_store(args.config)
    result = asyncio.run(measure(args.config, args.runs, args.question, args.new_store))
    json.dump(result, sys.stdout)
    print()
    return 0 if not result["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
