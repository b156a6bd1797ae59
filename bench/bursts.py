"""Many people asking at once, through Slack (issue 26, goal 5): run by ``bench.slack_path``.

At one N: each kind of question asked alone three times (its median wall is "one question's wall"), then a
burst of ``people`` identical questions ("status", each from another person, all sent at once), then a burst
of mixed ones (status, settings, GPUs, throughput in turn). Measured from outside the bot: each answer's wall
from the burst's start to its last message in its thread (a missing answer counts, and is said), the answers
that say "unreachable" or "inferbot is busy", the SSH exec requests the nodes' sshd logged during the burst,
and the bot process's CPU for the whole burst against one question's (one shared answer costs one answer and
its posts, not ``people`` answers).
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

from bench.real_cheap import QUESTIONS, exec_count
from bench.slack_harness import Slack, texts

SINGLES = 3
WITHIN_S = 300.0


async def _alone(slack: Slack, question: str) -> tuple[float, float]:
    """Median wall and bot CPU (s) of ``question`` asked alone."""
    assert slack.bot is not None
    walls, cpus = [], []
    for i in range(SINGLES):
        c0 = slack.bot.cpu_ns()
        wall, _ = await slack.ask(question, f"UALONE{i:04d}")
        await asyncio.sleep(0.05)
        walls.append(wall)
        cpus.append((slack.bot.cpu_ns() - c0) / 1e9)
        slack.forget()
    return statistics.median(walls), statistics.median(cpus)


async def burst(slack: Slack, questions: list[str], n: int, logs: list[str]) -> dict[str, Any]:
    """Every question of ``questions`` sent at once, each by another person; what came back, and when."""
    assert slack.bot is not None
    asked = [(q, f"UBURST{i:05d}", slack.next_ts()) for i, q in enumerate(questions)]
    execs0, cpu0 = exec_count(logs), slack.bot.cpu_ns()
    t0 = time.monotonic()
    await asyncio.gather(*(slack.send(q, user, ts) for q, user, ts in asked))
    sent_s = time.monotonic() - t0

    async def one(q: str, ts: str) -> tuple[str, float | None, str]:
        try:
            calls = await slack.answered(ts, slack.expected[q], WITHIN_S)
        except TimeoutError:
            return q, None, ""
        return q, max(c.at for c in calls) - t0, texts(calls)

    done = await asyncio.gather(*(one(q, ts) for q, _, ts in asked))
    await asyncio.sleep(0.05)
    execs, cpu = exec_count(logs) - execs0, (slack.bot.cpu_ns() - cpu0) / 1e9
    slack.forget()
    walls = [w for _, w, _ in done if w is not None]
    slowest: dict[str, float] = {}
    for q, w, _ in done:
        if w is not None:
            slowest[q] = max(slowest.get(q, 0.0), w)
    return {"asked": len(asked), "answered": len(walls), "sent_in_s": round(sent_s, 3),
            "slowest_s": max(walls, default=None), "median_s": statistics.median(walls) if walls else None,
            "slowest_by_question": slowest,
            "unreachable": sum(1 for *_, t in done if "unreachable" in t),
            "busy": sum(1 for *_, t in done if "inferbot is busy" in t),
            "ssh_execs": execs, "ssh_execs_per_node": execs / n, "bot_cpu_s": round(cpu, 3)}


async def measure(slack: Slack, n: int, people: int, logs: list[str]) -> dict[str, Any]:
    """The singles, the identical burst and the mixed burst at one N."""
    alone = {kind: await _alone(slack, q) for kind, q in QUESTIONS.items()}
    identical = await burst(slack, [QUESTIONS["status"]] * people, n, logs)
    kinds = list(QUESTIONS.values())
    mixed = await burst(slack, [kinds[i % len(kinds)] for i in range(people)], n, logs)
    one_status, one_cpu = alone["status"]
    slowest_alone = max(w for w, _ in alone.values())
    for b, ref in ((identical, one_status), (mixed, slowest_alone)):
        b["one_question_s"] = ref
        b["slowest_vs_one"] = None if b["slowest_s"] is None else b["slowest_s"] / ref
    identical["bot_cpu_vs_one_answer"] = identical["bot_cpu_s"] / one_cpu if one_cpu else None
    return {"nodes": n, "people": people, "alone": {k: {"wall_s": w, "bot_cpu_s": c} for k, (w, c) in alone.items()},
            "identical": identical, "mixed": mixed}
