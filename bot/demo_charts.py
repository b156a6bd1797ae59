"""History for the demo's charts: a day of the Qwen server's samples, earlier Kimi loads with phases.

The demo cluster starts fresh, and a chart needs history the watcher would have gathered over hours.
This writes such history through the store's own methods (the counters go in, the store derives the
rates and folds old samples as it would for real samples), shaped like the simulated servers: Qwen's
~900 tok/s traffic following the working day, one restart by a person, Kimi's ~30-minute loads.
"""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta

from services.store.ports import StateStore

SAMPLE_EVERY_S = 120
DEMO_USER = "U0DEMO"


async def seed_chart_history(store: StateStore, now: datetime) -> None:
    """Write the demo's chart history into ``store`` (idempotent enough for a fresh demo database)."""
    await _seed_qwen(store, now)
    await _seed_kimi_loads(store, now)


async def _seed_qwen(store: StateStore, now: datetime) -> None:
    rng = random.Random(13)
    start = now - timedelta(hours=36)
    restart_at = now - timedelta(hours=6, minutes=20)
    process = start - timedelta(days=1)
    gen_total = prompt_total = 0.0
    at = start
    while at <= now:
        if process < restart_at <= at:
            # The restart: four minutes without samples, then a new process whose counters start at 0.
            await store.audit.record("restart.executed", DEMO_USER, "C0DEMO", "qwen", "gpu-b",
                                     "systemctl restart vllm-qwen3.service (demo history)", at=restart_at)
            process, gen_total, prompt_total = restart_at + timedelta(minutes=3), 0.0, 0.0
            at = restart_at + timedelta(minutes=4)
        hour = at.hour + at.minute / 60
        day = 0.25 + 0.85 * max(0.0, math.sin(math.pi * (hour - 6) / 14)) if 6 <= hour <= 20 else 0.25
        gen_tps = max(0.0, 900 * day * (1 + rng.gauss(0, 0.06)))
        prompt_tps = gen_tps * (2.6 + rng.gauss(0, 0.3))
        gen_total += gen_tps * SAMPLE_EVERY_S
        prompt_total += max(0.0, prompt_tps) * SAMPLE_EVERY_S
        running = round(gen_tps / 37)
        waiting = max(0, round(rng.gauss(6, 3))) if day > 0.95 else 0
        await store.samples.record("qwen", "gpu-b", at, generation_total=gen_total, prompt_total=prompt_total,
                                   running=running, waiting=waiting, kv_cache_usage=min(0.95, 0.02 * running),
                                   process_start=process)
        at += timedelta(seconds=SAMPLE_EVERY_S)
    await store.samples.compact(now)


async def _seed_kimi_loads(store: StateStore, now: datetime) -> None:
    # (days ago, outcome, seconds in each phase): the split vLLM's log shows for this deployment.
    loads = [
        (9, "ready", {"loading_weights": 1290, "kv_cache": 150, "compiling": 290, "starting_api": 38}),
        (6, "failed", {"waiting_for_gpu": 140, "loading_weights": 1275, "kv_cache": 65}),
        (5, "ready", {"waiting_for_gpu": 95, "loading_weights": 1310, "kv_cache": 160, "compiling": 300,
                      "starting_api": 41}),
        (3, "ready", {"loading_weights": 1335, "kv_cache": 148, "compiling": 288, "starting_api": 37}),
        (2, "ready", {"loading_weights": 1320, "kv_cache": 152, "compiling": 292, "starting_api": 38}),
    ]
    for i, (days, outcome, phases) in enumerate(loads):
        started = (now - timedelta(days=days)).replace(hour=9 + i, minute=12, second=0, microsecond=0)
        inv = f"demo-load-{i}" if days != 2 else "demo-previous-load"
        t = started
        for phase, seconds in phases.items():
            await store.loads.record_phase("kimi", "gpu-a", inv, phase, t)
            t += timedelta(seconds=seconds)
        total = (t - started).total_seconds()
        await store.loads.record("kimi", "gpu-a", inv, started, t if outcome == "ready" else None,
                                 "ready" if outcome == "ready" else "failed", total)
