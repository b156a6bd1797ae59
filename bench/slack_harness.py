"""The Slack path's harness (issue 26): the serving bot in a process of its own over ``bench.real_cheap``'s
nodes, and the Slack stand-in that asks it as Slack does. Used by :mod:`bench.slack_path` and
:mod:`bench.bursts`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from bench.common import REPO_ROOT, Manifest
from tests.slack.fake_slack import BOT_USER_ID, TEAM_ID, Call, FakeSlack

SIGNING_SECRET = "benchsigningsecret0123456789abcd"
BOT_TOKEN = "xoxb-111-222-BenchBotTokenValue"
CHANNEL = "C0BENCH01"
CLK_TCK = os.sysconf("SC_CLK_TCK")
SETTINGS, STATUS = "what are current settings?", "status"


# ----------------------------------------------------------------------------------------------------------
# the nodes and the bot, each in a process of its own


@contextlib.contextmanager
def real_cheap_nodes(n: int, config_ns: list[int], node_time: str = "recorded", start_timeout_s: float = 300.0
                     ) -> Iterator[Manifest]:
    """A ``bench.real_cheap`` process with ``n`` nodes; stopped (its workdir removed) on the way out."""
    workdir = Path(tempfile.mkdtemp(prefix="ibench-real-", dir="/tmp"))
    manifest = workdir / "manifest.json"
    log = open(workdir.parent / f"{workdir.name}.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.real_cheap", "--nodes", str(n), "--configs", ",".join(map(str, config_ns)),
         "--workdir", str(workdir), "--manifest", str(manifest), "--node-time", node_time],
        stdin=subprocess.PIPE, stdout=log, stderr=log, cwd=REPO_ROOT,
        env=os.environ | {"PYTHONPATH": str(REPO_ROOT)}, start_new_session=True)
    try:
        deadline = time.monotonic() + start_timeout_s
        while not manifest.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the real cheap nodes did not start: {Path(log.name).read_text()[-1500:]}")
            time.sleep(0.1)
        yield Manifest.load(manifest)
    finally:
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        with contextlib.suppress(OSError):
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
        with contextlib.suppress(OSError):
            os.unlink(log.name)
        shutil.rmtree(workdir, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Bot:
    """``inferbot serve --http`` in its own process."""

    proc: subprocess.Popen[bytes]
    url: str
    log: Path

    def cpu_ns(self) -> int:
        """CPU of the bot's live threads so far (schedstat: nanoseconds)."""
        total = 0
        with contextlib.suppress(OSError):
            for tid in os.listdir(f"/proc/{self.proc.pid}/task"):
                with contextlib.suppress(OSError, ValueError), open(f"/proc/{self.proc.pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
        return total

    def cpu_s_all(self) -> float:
        """CPU of the bot process so far, every thread that ever ran (clock ticks)."""
        return sum(self.user_sys_s())

    def user_sys_s(self) -> tuple[float, float]:
        """User and system CPU of the bot process so far (clock ticks): system time is mostly sockets' — SSH to
        the nodes and HTTP to Slack —, and on loopback the kernel's work for the receiving end is counted here
        too."""
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK

    def peak_rss_kib(self) -> int:
        """VmHWM of the bot process."""
        with contextlib.suppress(OSError), open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0


def _start_bot(config_path: str, api_url: str) -> tuple[Path, Bot, int]:
    """Its config (the benchmark's, plus the stand-in's Slack settings, watchers off) and the process."""
    work = Path(tempfile.mkdtemp(prefix="ibench-bot-"))
    cfg = work / "inferbot.toml"
    cfg.write_text(Path(config_path).read_text() + "\n[slack]\n"
                   f'api_url = "{api_url}"\nrate_limit_per_minute = 1000000\n\n[watch]\nenabled = false\n')
    port = _free_port()
    log = work / "bot.log"
    inferbot = Path(sys.executable).with_name("inferbot")
    env = os.environ | {"SLACK_BOT_TOKEN": BOT_TOKEN, "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                        "XDG_STATE_HOME": str(work / "xdg")}
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(inferbot), "serve", "--http", "--port", str(port), "--config", str(cfg)],
                                stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env, cwd=REPO_ROOT,
                                start_new_session=True)
    return work, Bot(proc=proc, url=f"http://127.0.0.1:{port}/slack/events", log=log), port


@contextlib.asynccontextmanager
async def serving_bot(config_path: str, api_url: str) -> AsyncIterator[Bot]:
    """``inferbot serve --http`` on ``config_path`` plus the Slack settings of the stand-in."""
    work, bot, port = _start_bot(config_path, api_url)
    proc, log = bot.proc, bot.log
    try:
        deadline = time.monotonic() + 120
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"inferbot serve did not start: {log.read_text(errors='replace')[-1500:]}")
            await asyncio.sleep(0.05)  # it asks the stand-in (auth.test), served by this event loop, first
        yield bot
    finally:
        with contextlib.suppress(OSError):
            proc.send_signal(signal.SIGTERM)
        for _ in range(1200):  # the stand-in keeps answering while the bot stops
            if proc.poll() is not None:
                break
            await asyncio.sleep(0.05)
        else:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        shutil.rmtree(work, ignore_errors=True)


# ----------------------------------------------------------------------------------------------------------
# asking as Slack does


@dataclass
class Slack:
    """The stand-in, and the signed requests it sends the bot."""

    fake: FakeSlack
    http: aiohttp.ClientSession
    bot: Bot | None = None
    _n: int = 0
    expected: dict[str, int] = field(default_factory=dict)  # question -> messages its answer is posted as

    def next_ts(self) -> str:
        self._n += 1
        return f"1800000000.{self._n:06d}"

    async def send(self, text: str, user: str, ts: str) -> None:
        """One ``app_mention`` event, signed, to the bot; it must be acknowledged with 200."""
        assert self.bot is not None
        self._n += 1
        body = json.dumps({
            "token": "legacy", "team_id": TEAM_ID, "api_app_id": "A0BENCH", "type": "event_callback",
            "event_id": f"EvBench{self._n:09d}", "event_time": int(time.time()),
            "authorizations": [{"team_id": TEAM_ID, "user_id": BOT_USER_ID, "is_bot": True}],
            "event": {"type": "app_mention", "user": user, "text": f"<@{BOT_USER_ID}> {text}", "ts": ts,
                      "channel": CHANNEL, "event_ts": ts}})
        stamp = str(int(time.time()))
        sig = "v0=" + hmac.new(SIGNING_SECRET.encode(), f"v0:{stamp}:{body}".encode(), hashlib.sha256).hexdigest()
        headers = {"Content-Type": "application/json", "X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": sig}
        async with self.http.post(self.bot.url, data=body, headers=headers) as r:
            if r.status != 200:
                raise RuntimeError(f"the bot answered the event with {r.status}: {(await r.text())[:200]}")

    def posts(self, ts: str) -> list[Call]:
        return [c for c in self.fake.calls if c.method == "chat.postMessage" and c.body.get("thread_ts") == ts]

    async def answered(self, ts: str, count: int, within: float) -> list[Call]:
        """Wait until ``count`` messages were posted in the thread ``ts``."""
        cond = self.fake._changed
        async with cond:
            await asyncio.wait_for(cond.wait_for(lambda: len(self.posts(ts)) >= count), within)
        return self.posts(ts)

    async def settled(self, ts: str, within: float = 300.0) -> list[Call]:
        """The messages of an answer whose length is not known yet: until no more come for a while."""
        seen, quiet_since = 0, time.monotonic()
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            now = len(self.posts(ts))
            if now != seen:
                seen, quiet_since = now, time.monotonic()
            elif seen and time.monotonic() - quiet_since > 1.0:
                return self.posts(ts)
            await asyncio.sleep(0.02)
        raise TimeoutError(f"no complete answer in the thread {ts}")

    async def ask(self, text: str, user: str, within: float = 600.0) -> tuple[float, list[Call]]:
        """Ask once; wall from sending to the answer's last message, and its messages."""
        ts = self.next_ts()
        t0 = time.monotonic()
        await self.send(text, user, ts)
        if text not in self.expected:
            calls = await self.settled(ts, within)
            self.expected[text] = len(calls)
        else:
            calls = await self.answered(ts, self.expected[text], within)
        return max(c.at for c in calls) - t0, calls

    def forget(self) -> None:
        """Drop the recorded calls (they pile up over hundreds of answers)."""
        self.fake.calls.clear()


def texts(calls: list[Call]) -> str:
    """Everything a person reads in these messages."""
    return "\n".join(json.dumps(c.body.get("blocks"), ensure_ascii=False) + str(c.body.get("text", ""))
                     for c in calls)


