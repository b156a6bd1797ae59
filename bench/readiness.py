"""Readiness-notice latency: from the fake vLLM answering ``/health`` 200 to the fake Slack getting "✅ … is ready".

    python -m bench.readiness --samples 3

One simulated Kimi node (a short load) behind a real sshd on 127.0.0.2, the fake Slack Web API on
loopback, and the bot's own pieces: ``runtime(config)``, ``Poster``, ``BotScheduler`` with the
default ``[watch] poll`` interval, and ``handlers.follow.start_follow`` as a confirmed restart calls it.
For each sample the unit is restarted, the follow starts ``offset`` seconds later (so ``/health`` turns 200
at a different point of the poll cycle each time; the last sample lands just after a poll, near the worst
case), and this process polls ``/health`` every 10 ms to
timestamp the moment it turns 200. It also timestamps each follow probe, to report how long the poll
that saw "ready" took to get the notice to Slack (the part the bot controls).

Needs the restart/readiness feature (``bot/scheduler.py``, ``bot/jobs.py``, ``handlers/follow.py``,
``tests/slack/fake_slack.py``); without it, it reports "not measured (feature not present)".
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench.cluster import PR_SET_CHILD_SUBREAPER, reap_all
from bench.common import REPO_ROOT

if TYPE_CHECKING:
    from bot.app import Runtime
    from bot.scheduler import BotScheduler
    from config.models import BotConfig
    from services.sim.node import SimNode

FEATURE = {"bot.scheduler": "bot/scheduler.py", "bot.jobs": "bot/jobs.py", "handlers.follow": "handlers/follow.py",
           "bot.slack.poster": "bot/slack/poster.py"}
FAKE_SLACK = REPO_ROOT / "tests" / "slack" / "fake_slack.py"
NOTIFY = "C0NOTIFY"
LOAD_S = 4.0  # the simulated load after each restart (about; plus the fake server's start-up)


def missing_feature() -> list[str]:
    """Files of the restart/readiness feature that are not here."""
    missing = [path for mod, path in FEATURE.items() if importlib.util.find_spec(mod) is None]
    if not FAKE_SLACK.exists():
        missing.append("tests/slack/fake_slack.py")
    return missing


def _load_fake_slack() -> Any:
    spec = importlib.util.spec_from_file_location("bench_fake_slack", FAKE_SLACK)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod.FakeSlack


async def _first_200(url: str, limit_s: float) -> float | None:
    """Monotonic time at which ``url`` first answers 200 (polled every 10 ms), or None."""
    import aiohttp

    deadline = time.monotonic() + limit_s
    timeout = aiohttp.ClientTimeout(total=0.5)
    async with aiohttp.ClientSession(timeout=timeout) as s:
        while time.monotonic() < deadline:
            with contextlib.suppress(aiohttp.ClientError, TimeoutError, OSError):
                async with s.get(url) as r:
                    if r.status == 200:
                        return time.monotonic()
            await asyncio.sleep(0.01)
    return None


async def run(samples: int) -> dict[str, Any]:
    """Measure ``samples`` restarts; the report dict (``latency_s`` = the worst sample)."""
    from services.sim.scenarios import KIMI_UNIT
    from tests.sshd import ClientKey, login_user, start_sshd

    fake_slack_cls = _load_fake_slack()
    tmp = Path(tempfile.mkdtemp(prefix="ibench-ready-", dir="/tmp"))
    os.chmod(tmp, 0o755)
    user = login_user()
    sim = _sim_node(tmp, user)
    sshd = None
    fs = None
    try:
        await sim.start()
        await sim.wait_for(KIMI_UNIT, "ready", 60)
        key = ClientKey(tmp)
        sshd = await asyncio.to_thread(start_sshd, key, sim.shell_env(), "127.0.0.2", user)
        (tmp / "known_hosts").write_text(sshd.known_hosts_line() + "\n")
        fs = await fake_slack_cls().start()
        config = _config(sshd.host, sshd.port, user, str(key.private), tmp)
        poll_s = float(config.watch.poll)  # the default: nothing above sets it
        out: dict[str, Any] = {"poll_interval_s": poll_s, "samples": await _samples(config, sim, fs, samples)}
        return _summary(out, poll_s)
    finally:
        if fs is not None:
            await fs.stop()
        if sshd is not None:
            sshd.stop()
        await sim.stop()
        shutil.rmtree(tmp, ignore_errors=True)


def _sim_node(tmp: Path, user: str) -> SimNode:
    """The simulated Kimi node with a short load (``LOAD_S``), under ``tmp/node``."""
    from services.sim.node import SimNode
    from services.sim.scenarios import fast_profile, kimi_node, kimi_unit
    from tests.sshd import free_port

    port = free_port()
    scenario = kimi_node(fast=True, port=port)
    scenario.units[0] = kimi_unit(fast=True, port=port, profile=fast_profile(seconds_per_shard=LOAD_S / 119))
    (tmp / "node").mkdir()
    os.chmod(tmp / "node", 0o755)
    return SimNode(tmp / "node", scenario, run_as=user if os.geteuid() == 0 else None)


def _config(host: str, port: int, user: str, key_file: str, tmp: Path) -> BotConfig:
    """The bot's config: the one node, its Kimi service, the notice channel, the state under ``tmp``."""
    from config.models import BotConfig
    from services.sim.scenarios import KIMI_UNIT

    return BotConfig.model_validate({
        "nodes": [{"name": "gpu-a", "host": host, "port": port, "user": user,
                   "key_file": key_file, "known_hosts": str(tmp / "known_hosts")}],
        "services": [{"name": "kimi", "node": "gpu-a", "unit": KIMI_UNIT}],
        "notify": {"channel": NOTIFY},
        "state": {"dir": str(tmp / "state")},
    })


async def _samples(config: BotConfig, sim: SimNode, fs: Any, samples: int) -> list[dict[str, Any]]:
    """The bot's runtime and scheduler, then ``samples`` restarts, each followed until its notice."""
    from slack_sdk.web.async_client import AsyncWebClient

    from bot.app import runtime
    from bot.scheduler import BotScheduler
    from bot.slack.poster import Poster

    poll_s = float(config.watch.poll)
    found: list[dict[str, Any]] = []
    async with runtime(config) as rt:
        probes: list[tuple[float, float]] = []  # (start, end) of each follow probe
        real_snapshot = rt.cluster.snapshot

        async def timed_snapshot(*a: Any, **kw: Any) -> Any:
            t0 = time.monotonic()
            try:
                return await real_snapshot(*a, **kw)
            finally:
                probes.append((t0, time.monotonic()))

        rt.cluster.snapshot = timed_snapshot  # type: ignore[method-assign]
        notifier = Poster(AsyncWebClient(token="xoxb-bench", base_url=fs.api_url))
        sched = BotScheduler()
        await sched.start(rt.with_ports(notifier=notifier, jobs=sched), watch=False)
        try:
            load_s = LOAD_S
            for i in range(samples):
                # Spread /health over the poll cycle; the last sample starts following just before the
                # load ends, so /health turns 200 just after the first poll: close to the worst case.
                offset = max(0.0, load_s * i / max(1, samples - 1) - 0.3) if i else 0.0
                sample, health_after_s = await _sample(rt, sched, sim, fs, offset, probes)
                found.append(sample)
                if health_after_s is None:
                    continue
                if i == 0:
                    load_s = min(health_after_s, poll_s)
                await _until_idle(sched, 20)  # the follow job removes itself after the notice
        finally:
            await sched.shutdown()
    return found


async def _sample(rt: Runtime, sched: BotScheduler, sim: SimNode, fs: Any, offset: float,
                  probes: list[tuple[float, float]]) -> tuple[dict[str, Any], float | None]:
    """Restart the unit, follow it ``offset`` s later as a confirmed restart does, and time its notice; the
    sample and how long /health took to turn 200 after the restart (None when the sample failed)."""
    from handlers.follow import start_follow
    from services.sim.scenarios import KIMI_UNIT

    service = rt.config.services[0]
    poll_s = float(rt.config.watch.poll)
    before = len(fs.calls)
    started_at = datetime.now(UTC)
    res = await sim.restart_unit(KIMI_UNIT)
    if res.rc != 0:
        raise RuntimeError(f"restart failed: {res.message}")
    restarted = time.monotonic()
    health = asyncio.ensure_future(_first_200(f"{sim.api_url(KIMI_UNIT)}/health", 120))
    await asyncio.sleep(offset)
    # As a confirmed restart does: follow the new invocation (the restart returned it).
    await start_follow(rt.context(), service, "restart", started_at,
                       invocation_id=sim.state(KIMI_UNIT).invocation_id or None)
    t_health = await health
    t_notice = await _notice(fs, before, "is ready", poll_s + 60)
    if t_health is None or t_notice is None:
        posted = [str(c.body.get("text", ""))[:120] for c in fs.calls[before:] if c.method == "chat.postMessage"]
        follow = await rt.store.follows.get(f"{service.name}@{service.node}") if rt.store else None
        return {"error": "no /health 200" if t_health is None else "no notice", "posted": posted[-5:],
                "follow": repr(follow)[:400], "jobs": sched.job_ids()}, None
    seen = [p for p in probes if p[0] >= t_health and p[0] <= t_notice]
    return {
        "follow_started_after_restart_s": round(offset, 2),
        "latency_s": round(t_notice - t_health, 3),
        "probe_to_notice_s": round(t_notice - seen[0][0], 3) if seen else None,
    }, t_health - restarted


def _summary(out: dict[str, Any], poll_s: float) -> dict[str, Any]:
    """``out`` with the worst latency, the status line and the worst-case bound added."""
    good = [s for s in out["samples"] if "latency_s" in s]
    if not good:
        out["status"] = "not measured (no sample completed)"
        return out
    worst = max(s["latency_s"] for s in good)
    handling = [s["probe_to_notice_s"] for s in good if s["probe_to_notice_s"] is not None]
    out["latency_s"] = worst
    out["status"] = f"measured: worst of {len(good)} samples {worst:.2f}s with poll {poll_s:g}s"
    if handling:
        out["worst_case_bound_s"] = round(poll_s + max(handling), 3)
        out["bound_note"] = ("/health can turn 200 just after a poll: the worst case is the poll interval plus "
                             "the time from the start of the poll that sees 'ready' to the notice")
    return out


async def _until_idle(sched: Any, limit_s: float) -> None:
    """Wait until no follow job is scheduled (so the next sample's job is not removed by this one's end)."""
    for _ in range(int(limit_s / 0.05)):
        if not any(j.startswith("follow:") for j in sched.job_ids()):
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)


async def _notice(fs: Any, after: int, word: str, limit_s: float) -> float | None:
    """When (monotonic, as the fake Slack recorded it) a chat.postMessage containing ``word`` arrived."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        for call in fs.calls[after:]:
            if call.method == "chat.postMessage" and word in json.dumps(call.body, ensure_ascii=False):
                return float(call.at)
        await asyncio.sleep(0.01)
    return None


def measure_readiness(samples: int = 3, timeout_s: float = 240.0) -> dict[str, Any]:
    """Run ``python -m bench.readiness`` in its own process and return what it reported."""
    missing = missing_feature()
    if missing:
        return {"status": f"not measured (feature not present: {', '.join(missing)})"}
    return run_measurement(["bench.readiness", "--samples", str(samples)], timeout_s)


def run_measurement(module_argv: list[str], timeout_s: float) -> dict[str, Any]:
    """Run ``python -m MODULE ARGS…`` (``module_argv``) in a process of its own and return the JSON object its
    last line prints, or a ``status`` saying why there is none."""
    env = os.environ | {"PYTHONPATH": str(REPO_ROOT), "INFERBOT_LOG_LEVEL": "ERROR"}
    # Its own session: Ctrl-C here must not kill it mid-way; it is told to stop and then cleans up itself.
    p = subprocess.Popen([sys.executable, "-m", *module_argv], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, cwd=REPO_ROOT, env=env, start_new_session=True)
    try:
        stdout, stderr = p.communicate(timeout=timeout_s)
    except BaseException as e:
        _stop(p)
        if isinstance(e, subprocess.TimeoutExpired):
            return {"status": f"not measured (no result within {timeout_s:g}s)"}
        raise
    try:
        return dict(json.loads(stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        tail = (stderr or stdout).strip().splitlines()[-1:] or ["no output"]
        return {"status": f"not measured (the measurement failed: {tail[0][:300]})"}


def _stop(p: subprocess.Popen[str]) -> None:
    """SIGTERM (it tears down its node, sshd and fake Slack), then SIGKILL its group if it lingers."""
    with contextlib.suppress(OSError):
        p.send_signal(signal.SIGTERM)
    try:
        p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(p.pid, signal.SIGKILL)
        p.communicate()


def main() -> int:
    """Entry point of ``python -m bench.readiness``."""
    p = argparse.ArgumentParser(prog="python -m bench.readiness", description=__doc__.splitlines()[0])
    p.add_argument("--samples", type=int, default=3)
    args = p.parse_args()
    missing = missing_feature()
    if missing:
        print(json.dumps({"status": f"not measured (feature not present: {', '.join(missing)})"}))
        return 0

    def interrupted(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)  # so the finally blocks run and stop what was started
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        print(json.dumps(asyncio.run(run(args.samples)), ensure_ascii=False))
    finally:
        reap_all()  # anything the node or sshd left behind came back to us as the subreaper
    return 0


if __name__ == "__main__":
    sys.exit(main())
