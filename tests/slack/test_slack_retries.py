"""Slack retries and acks with the state store out of reach (issue 22, item 3).

Through the real Bolt app over signed HTTP and the fake Slack, on a real SQLite state database that
another process holds a write lock on (as a backup, a `sqlite3` shell or a second bot would).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import all_text, command_form, event_body, mention
from fake_slack import FakeSlack

import bot.slack.app as slack_app
from bot.app import Runtime, runtime
from config.models import BotConfig

SLACK_ACK_S = 3.0  # Slack's deadline for an ack; past it Slack retries the delivery
_LOCKER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
db.execute("BEGIN IMMEDIATE")  # the write lock: every other writer waits
print("locked", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
"""


class Lock:
    """Another process holding the write lock on a SQLite database until ``release``."""

    def __init__(self, path: Path) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", _LOCKER, str(path)], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "locked"

    def release(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.write("\n")
            self.proc.stdin.flush()
            self.proc.wait(10)


@pytest.fixture
def lock_of() -> Iterator[Any]:
    made: list[Lock] = []

    def take(path: Path) -> Lock:
        made.append(Lock(path))
        return made[-1]

    yield take
    for lock in made:
        lock.release()


@pytest.fixture
async def sqlite_runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    """No nodes, and the state in a SQLite file whose schema exists (so only the lock is in the way)."""
    config = BotConfig.model_validate({"state": {"dir": str(tmp_path / "state")}})
    async with runtime(config) as rt:
        assert rt.store is not None
        await rt.store.prepare()
        yield rt


def db_file(rt: Runtime) -> Path:
    path = rt.config.state.directory() / "inferbot.sqlite3"
    assert path.exists()
    return path


async def timed_post(http: Any, body: dict[str, Any], headers: dict[str, str] | None = None) -> tuple[int, float]:
    started = time.monotonic()
    status, _ = await http.post_event(body, headers=headers)
    return status, time.monotonic() - started


async def test_a_locked_state_database_never_holds_the_ack_and_the_answer_comes_once(
        fake_slack: FakeSlack, make_app, serve_http, sqlite_runtime: Runtime, lock_of) -> None:
    http = await serve_http(make_app(sqlite_runtime))
    lock = lock_of(db_file(sqlite_runtime))
    body = event_body(mention("help", ts="1700000100.000100"))
    status, took = await timed_post(http, body)
    assert status == 200 and took < SLACK_ACK_S
    # Slack redelivers anyway (its own hiccup): acked at once too, and not a second answer.
    status, took = await timed_post(http, body, {"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"})
    assert status == 200 and took < SLACK_ACK_S
    # The lock outlasts the store's own wait (10 s): the first claim fails, is tried again, and nothing is
    # answered while nobody could claim the event.
    await asyncio.sleep(11.0)
    assert fake_slack.calls_to("chat.postMessage") == []
    lock.release()
    [answer] = await fake_slack.wait_for("chat.postMessage", 1, within=15)
    await fake_slack.quiet(1.0)
    assert len(fake_slack.calls_to("chat.postMessage")) == 1
    assert answer.body["thread_ts"] == "1700000100.000100" and "what I can answer" in all_text(answer.body["blocks"])


async def test_a_claim_that_cannot_be_made_in_time_is_said_once_not_answered(
        fake_slack: FakeSlack, make_app, serve_http, sqlite_runtime: Runtime, lock_of, monkeypatch) -> None:
    monkeypatch.setattr(slack_app, "CLAIM_PATIENCE_S", 1.0, raising=False)
    http = await serve_http(make_app(sqlite_runtime))
    lock = lock_of(db_file(sqlite_runtime))
    status, took = await timed_post(http, event_body(mention("help", ts="1700000110.000100")))
    assert status == 200 and took < SLACK_ACK_S
    [told] = await fake_slack.wait_for("chat.postMessage", 1, within=20)
    lock.release()
    await fake_slack.quiet(1.0)
    assert len(fake_slack.calls_to("chat.postMessage")) == 1  # told, and never answered as well
    assert told.body["thread_ts"] == "1700000110.000100"
    assert "could not take this question" in told.body["text"] and "ask again" in told.body["text"]


async def test_a_slash_command_is_acked_in_time_while_the_state_database_is_locked(
        fake_slack: FakeSlack, make_app, serve_http, sqlite_runtime: Runtime, lock_of) -> None:
    http = await serve_http(make_app(sqlite_runtime))
    lock_of(db_file(sqlite_runtime))
    started = time.monotonic()
    status, text = await http.post_form(command_form("help", fake_slack.response_url("locked")))
    assert status == 200 and time.monotonic() - started < SLACK_ACK_S and "Looking" in text
    # The rate limit cannot be read while the lock lasts: the question is answered rather than dropped.
    [answer] = await fake_slack.wait_for("response:locked", 1, within=20)
    assert "what I can answer" in all_text(answer.body["blocks"])
