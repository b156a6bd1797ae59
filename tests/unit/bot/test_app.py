"""bot/app.py: the runtime the composition root builds is whole and frozen; a front end's ports come with
a runtime built whole on the same core, never filled in."""

from __future__ import annotations

import dataclasses

import pytest

from bot.app import runtime
from config.models import BotConfig
from handlers.context import Asker
from handlers.notify import RecordingNotifier
from services.access import NoGroups, StaticGroups


async def test_the_runtime_is_frozen_and_ports_come_whole_with_a_new_one() -> None:
    async with runtime(BotConfig(), with_store=False) as core:
        with pytest.raises(dataclasses.FrozenInstanceError):
            core.notifier = RecordingNotifier()  # type: ignore[misc]
        notifier, groups = RecordingNotifier(), StaticGroups({"S1": ["U1"]})
        rt = core.with_ports(notifier=notifier, groups=groups)
        assert rt is not core and (core.notifier, core.groups) == (None, None)  # the core is left as it was
        assert (rt.config, rt.pool, rt.cluster, rt.store, rt.opening) == (core.config, core.pool, core.cluster,
                                                                          core.store, core.opening)
        ctx = rt.context(Asker(surface="slack", user_id="U1"))
        assert (ctx.notifier, ctx.groups, ctx.jobs, ctx.dashboards) == (notifier, groups, None, None)
        assert isinstance(core.context().groups, NoGroups)
        # with_ports names every port it keeps: none is carried over from the runtime it was called on
        assert rt.with_ports(groups=groups).notifier is None
