"""bot/scheduler.py: the scheduler is the runtime's ``jobs`` port, made before the runtime and started with
it — the runtime its jobs run against, complete, handed over once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot import jobs
from bot.app import runtime
from bot.scheduler import BotScheduler
from config.models import BotConfig
from handlers.context import Asker
from handlers.notify import RecordingNotifier


def config(tmp_path: Path) -> BotConfig:
    return BotConfig.model_validate({"state": {"dir": str(tmp_path)}, "watch": {"enabled": False}})


async def test_it_runs_its_jobs_against_the_runtime_whose_jobs_it_is(tmp_path: Path) -> None:
    async with runtime(config(tmp_path)) as core:
        sched = BotScheduler()
        sched.follow("kimi@gpu-a")  # before the start (a question answered while serve starts): nothing yet
        sched.expire("r-1", datetime.now(UTC))
        notifier = RecordingNotifier()
        rt = core.with_ports(notifier=notifier, jobs=sched)
        await sched.start(rt)
        try:
            live = jobs.current()
            assert live is not None and live.runtime is rt and live.notifier is notifier and live.scheduler is sched
            assert sched.runtime is rt and sched.leading
            # A job's context carries every port of that runtime: the follow it runs can stop itself.
            assert rt.context(Asker()).jobs is sched
            sched.expire("r-2", datetime.now(UTC) + timedelta(hours=1))
            assert "expire:r-2" in sched.job_ids() and "expire:r-1" not in sched.job_ids()
        finally:
            await sched.shutdown()
        assert jobs.current() is None


async def test_it_refuses_a_runtime_it_does_not_belong_to(tmp_path: Path) -> None:
    async with runtime(config(tmp_path)) as core:
        sched = BotScheduler()
        with pytest.raises(ValueError, match="whose jobs it is"):
            await sched.start(core.with_ports(notifier=RecordingNotifier(), jobs=BotScheduler()))
        with pytest.raises(ValueError, match="needs a notifier"):
            await sched.start(core.with_ports(jobs=sched))
        assert jobs.current() is None and not sched.leading
        await sched.shutdown()  # never started: nothing to stop
    async with runtime(config(tmp_path), with_store=False) as bare:
        with pytest.raises(RuntimeError, match="state store"):
            await sched.start(bare.with_ports(notifier=RecordingNotifier(), jobs=sched))
