"""The Slack front end's runtime: the composition root's core with every port Slack gives handlers, built
once by :func:`slack_runtime` and frozen.

``inferbot serve`` (``bot.slack.serve``) opens the core (``bot.app.runtime``), makes the scheduler, builds
this from both, and only then the Bolt app (``bot.slack.app.build_app``) and the scheduler's start: every
listener and every job receives this one object, complete. Nothing fills a port in later.
"""

from __future__ import annotations

from dataclasses import dataclass

from slack_sdk.web.async_client import AsyncWebClient

from bot.app import Runtime
from bot.slack.groups import SlackGroups
from bot.slack.home import HomePublisher
from bot.slack.poster import Poster
from handlers.ports import Jobs


@dataclass(frozen=True, kw_only=True)
class SlackRuntime(Runtime):
    """A ``Runtime`` whose ports are Slack's: none of them left to fill in.

    ``notifier`` is the one :class:`~bot.slack.poster.Poster`: handlers' notices, and every answer, chart,
    refusal and Home tab the front end posts itself. ``jobs`` is the scheduler of ``inferbot serve``; it is
    None only for an app without a state store to schedule in (tests of the plumbing).
    """

    notifier: Poster
    groups: SlackGroups
    dashboards: HomePublisher
    jobs: Jobs | None


def slack_runtime(core: Runtime, client: AsyncWebClient, *, jobs: Jobs | None) -> SlackRuntime:
    """The Slack runtime on ``core`` (as ``bot.app.runtime`` opened it), posting through ``client``.

    The Home publisher reads dashboards with the core and the group lookup only: reading posts nothing and
    schedules nothing, so it needs no other port (and no reference back to this runtime).
    """
    if core.notifier is not None or core.jobs is not None or core.groups is not None or core.dashboards is not None:
        raise ValueError("slack_runtime wants the core runtime (no ports): it gives Slack's own")
    poster = Poster(client)
    groups = SlackGroups(client)
    home = HomePublisher(core.with_ports(groups=groups), poster)
    return SlackRuntime(config=core.config, pool=core.pool, cluster=core.cluster, store=core.store,
                        opening=core.opening, notifier=poster, groups=groups, dashboards=home, jobs=jobs)
