"""The serving bot answering through Slack, measured from outside (issue 26, goals 5 and 6).

    python -m bench.slack_path --ns 1,64,512 --burst-ns 8,64 --runs 10 --people 50

The nodes are ``bench.real_cheap``'s: real sshd replaying what a real-systemd node running a loaded, busy vLLM
answered (a real journal, real ``/metrics``, real unit text). The bot is ``inferbot serve --http`` itself, in
its own process, started as an operator starts it (its config's ``[slack] api_url`` pointing at the Slack
stand-in, tokens from the environment, the watchers off so that only questions cost CPU). The Slack stand-in
(``tests/slack/fake_slack.py``) runs in this process: it sends each question as Slack does — an
``app_mention`` event, signed with the signing secret, POSTed to the bot's ``/slack/events`` — and receives
the bot's ``chat.postMessage`` calls. Nothing is read from inside the bot:

- **client CPU** (goal 6): the bot process's CPU (every thread's ``/proc/PID/task/*/schedstat``, ns) from the
  moment the event is sent until its answer's last message has arrived, divided by N: the Slack request's
  verification, the event claim and rate limit in the store, routing, the SSH round trip, parsing,
  redaction, the cards, the Block Kit render and every ``chat.postMessage``. The same over the whole batch
  from ``/proc/PID/stat`` (every thread that ever ran) is reported beside it.
- **bursts** (goal 5, :mod:`bench.bursts`): many people asking at once, every answer's wall from the burst's
  start to its last message, the answers that say "unreachable" or "busy", SSH execs counted in the nodes'
  sshd logs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from typing import Any

import aiohttp

from bench import bursts
from bench.common import raise_nofile
from bench.slack_harness import SETTINGS, STATUS, Slack, real_cheap_nodes, serving_bot, texts
from tests.slack.fake_slack import FakeSlack


async def client_cpu(slack: Slack, n: int, question: str, runs: int) -> dict[str, Any]:
    """Goal 6 at one N: ``runs`` questions one after another, the bot's CPU per node per question."""
    assert slack.bot is not None
    per_q, walls, failures = [], [], []
    user0, sys0 = slack.bot.user_sys_s()
    for i in range(runs):
        c0 = slack.bot.cpu_ns()
        wall, calls = await slack.ask(question, f"UBENCH{i:05d}")
        await asyncio.sleep(0.05)  # the bot logs the answer after its last post
        per_q.append((slack.bot.cpu_ns() - c0) / 1e6 / n)
        walls.append(wall)
        said = texts(calls)
        if "unreachable" in said or "inferbot is busy" in said:
            failures.append(i)
        slack.forget()
    user1, sys1 = slack.bot.user_sys_s()
    user, system = (user1 - user0) * 1000 / runs / n, (sys1 - sys0) * 1000 / runs / n
    return {"question": question, "nodes": n, "runs": runs, "messages": slack.expected.get(question),
            "cpu_ms_per_node": sorted(per_q), "cpu_ms_per_node_median": statistics.median(per_q),
            "cpu_ms_per_node_batch": user + system, "user_ms_per_node_batch": user,
            "sys_ms_per_node_batch": system, "wall_s_median": statistics.median(walls),
            "answers_with_unreachable_or_busy": failures}


async def measure(ns: list[int], burst_ns: list[int], runs: int, people: int,
                  questions: tuple[str, ...] = (SETTINGS, STATUS), node_time: str = "recorded") -> dict[str, Any]:
    """Every N: the serving bot over the real cheap nodes, goal 6's CPU, and the bursts where asked."""
    raise_nofile()
    out: dict[str, Any] = {"client_cpu": [], "bursts": [], "errors": []}
    every = sorted(set(ns) | set(burst_ns))
    fake = await FakeSlack().start()
    try:
        with real_cheap_nodes(max(every), every, node_time) as m:
            out["recording"] = m.recording
            async with aiohttp.ClientSession() as http:
                for n in every:
                    slack = Slack(fake=fake, http=http)
                    async with serving_bot(m.configs[n], fake.api_url) as bot:
                        slack.bot = bot
                        await slack.ask(SETTINGS, "UWARMUP01")  # opens the N connections
                        slack.forget()
                        if n in ns:
                            for q in questions:
                                out["client_cpu"].append(await client_cpu(slack, n, q, runs))
                        if n in burst_ns:
                            out["bursts"].append(await bursts.measure(slack, n, people, m.node_side["sshd_logs"]))
                        out.setdefault("peak_rss_kib", {})[n] = bot.peak_rss_kib()
    finally:
        await fake.stop()
    return out


def main() -> int:
    """Entry point of ``python -m bench.slack_path``."""
    p = argparse.ArgumentParser(prog="python -m bench.slack_path", description=__doc__.splitlines()[0])
    p.add_argument("--ns", default="1,64,512", help="N for the client CPU (goal 6)")
    p.add_argument("--burst-ns", default="8,64", help="N for the bursts (goal 5)")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--people", type=int, default=50)
    p.add_argument("--node-time", choices=["recorded", "none"], default="recorded",
                   help="the nodes answer after the time the real node took (default), or at once")
    args = p.parse_args()
    ns = [int(x) for x in args.ns.split(",") if x.strip()]
    burst_ns = [int(x) for x in args.burst_ns.split(",") if x.strip()]
    result = asyncio.run(measure(ns, burst_ns, args.runs, args.people, node_time=args.node_time))
    json.dump(result, sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
