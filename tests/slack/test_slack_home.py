"""The App Home dashboard through the real Bolt app (signed HTTP requests) against the fake Slack.

The fake's ``views.publish`` refuses a view the way Slack would (type, ≤ 100 blocks, text limits), so
every published view below is valid Block Kit within Slack's limits.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from conftest import SIGNING_SECRET, HttpApp, all_text, event_body, sign
from fake_slack import FakeSlack, view_problems
from test_restart_slack import slack_bot  # noqa: F401  (the fixture: real sshd, sim node, real app)

from bot.app import Runtime, runtime
from bot.slack.app import state_of
from bot.slack.home import HomePublisher
from bot.slack.home_view import view_dict
from config.models import BotConfig
from handlers.home import Dashboard, ServiceCard
from handlers.notify import dashboards_changed
from services.sim.scenarios import kimi_node
from tests.conftest import MakeCluster
from tests.sshd import free_port

ALICE, EVE = "U0ALICE", "U0EVE"
T0 = datetime(2026, 12, 2, 13, 0, tzinfo=UTC)


class Clock:
    """An injectable clock: pacing is tested by moving it, never by sleeping."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def advance(self, seconds: float) -> None:
        self.at += timedelta(seconds=seconds)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def fleet_config(tmp_path: Path, n_services: int = 1, nodes: int = 1, **extra: Any) -> BotConfig:
    """Services on nodes nobody listens on: every node is unreachable (fast: connection refused)."""
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    node_list = [{"name": f"gpu-{chr(97 + i)}", "host": "127.0.0.1", "port": closed_port(), "user": "root",
                  "known_hosts": str(known_hosts), "timeout": 2.0} for i in range(nodes)]
    services = [{"name": "kimi" if i == 0 else f"svc{i:03d}", "node": node_list[i % nodes]["name"],
                 "unit": f"vllm-{i}.service"} for i in range(n_services)]
    return BotConfig.model_validate({"nodes": node_list, "services": services,
                                     "state": {"dir": str(tmp_path / "state")}, **extra})


@dataclass
class Home:
    """The app under test: its HTTP endpoint, runtime, dashboard publisher and clock."""

    http: HttpApp
    rt: Runtime
    publisher: HomePublisher
    clock: Clock


@pytest.fixture
async def home_bot(fake_slack: FakeSlack, make_app: Any, serve_http: Any, tmp_path: Path) -> AsyncIterator[Any]:
    made: list[Any] = []

    async def start(config: BotConfig) -> Home:
        cm = runtime(config)
        core = await cm.__aenter__()
        app = make_app(core)
        rt = state_of(app).runtime
        made.append((cm, rt))
        publisher = rt.dashboards
        assert isinstance(publisher, HomePublisher) and state_of(app).registered.events >= {"app_home_opened"}
        clock = Clock(T0)
        publisher.clock = clock
        return Home(await serve_http(app), rt, publisher, clock)

    yield start
    for cm, rt in made:
        rt.dashboards.close()
        await make_app.drain()
        await cm.__aexit__(None, None, None)


def home_opened(user: str) -> dict[str, Any]:
    return event_body({"type": "app_home_opened", "user": user, "channel": "D0HOME", "tab": "home",
                       "event_ts": "1700000000.000100"})


async def click(http: HttpApp, action_id: str, value: str, user: str) -> None:
    """A button on the Home tab: a block_actions payload from a view (no channel, no message)."""
    payload = {"type": "block_actions", "user": {"id": user}, "team": {"id": "T0TEAM"}, "api_app_id": "A0APP",
               "container": {"type": "view", "view_id": "V0HOME"}, "trigger_id": "1.2.3",
               "view": {"id": "V0HOME", "type": "home"},
               "actions": [{"action_id": action_id, "block_id": "b1", "type": "button", "value": value,
                            "action_ts": "1700000100.000000"}]}
    raw = urlencode({"payload": json.dumps(payload)})
    async with http.session.post(http.url + "/slack/events", data=raw, headers={
            "Content-Type": "application/x-www-form-urlencoded", **sign(raw, secret=SIGNING_SECRET)}) as r:
        assert r.status == 200


def published(fs: FakeSlack, user: str | None = None) -> list[dict[str, Any]]:
    """The views Slack accepted (for ``user``)."""
    out = []
    for c in fs.calls_to("views.publish"):
        view = c.body["view"]
        view = json.loads(view) if isinstance(view, str) else view
        if not view_problems(view, "home") and (user is None or c.body.get("user_id") == user):
            out.append(view)
    return out


def buttons(view: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for b in view["blocks"]:
        if b.get("accessory", {}).get("type") == "button":
            out.append(b["accessory"])
        out += [e for e in b.get("elements", []) if e.get("type") == "button"]
    return out


# --------------------------------------------------------------------------------------------------------


async def test_home_opened_publishes_a_valid_dashboard(fake_slack: FakeSlack, home_bot: Any, tmp_path: Path) -> None:
    h = await home_bot(fleet_config(tmp_path))
    http = h.http
    assert (await http.post_event(home_opened(ALICE)))[0] == 200
    [call] = await fake_slack.wait_for("views.publish", 1, within=10)
    assert call.body["user_id"] == ALICE
    assert not fake_slack.invalid_views
    [view] = published(fake_slack, ALICE)
    text = all_text(view["blocks"])
    assert "fleet dashboard" in text and "Read at *2026-12-02 13:00:00 UTC*" in text
    assert "kimi" in text and "gpu-a" in text
    assert "gpu-a* is unreachable — " in text and "refused" in text  # the node's reason
    assert [b["action_id"] for b in buttons(view)] == ["home_refresh"]  # nobody may restart by default
    # The Messages tab opening is not the Home tab: nothing more is published.
    await http.post_event(event_body({"type": "app_home_opened", "user": ALICE, "channel": "D0", "tab": "messages",
                                      "event_ts": "1700000000.000200"}))
    await fake_slack.quiet(0.3)
    assert len(fake_slack.calls_to("views.publish")) == 1


async def test_150_services_on_down_nodes_are_one_line_per_node(fake_slack: FakeSlack, home_bot: Any,
                                                                 tmp_path: Path) -> None:
    # Each down node's reason once, with the services it took with it; no "unreachable" card per service
    # repeating it (issue 22: they filled the 100 blocks ahead of every service that answered). The cut at
    # 100 blocks is test_render_limits_with_long_texts_and_buttons's.
    h = await home_bot(fleet_config(tmp_path, n_services=150, nodes=3))
    http = h.http
    await http.post_event(home_opened(ALICE))
    await fake_slack.wait_for("views.publish", 1, within=15)
    assert not fake_slack.invalid_views, fake_slack.invalid_views
    [view] = published(fake_slack)
    assert len(view["blocks"]) <= 100
    text = all_text(view["blocks"])
    shown = sum(1 for b in view["blocks"]
                if b["type"] == "section" and " on *gpu-" in b.get("text", {}).get("text", ""))
    assert shown == 0 and "more services not shown" not in text
    assert text.count("connection refused") == 3, text
    for node, first in (("gpu-a", "kimi, svc003, svc006"), ("gpu-b", "svc001, svc004, svc007"),
                        ("gpu-c", "svc002, svc005, svc008")):
        assert f"*{node}* is unreachable — connection refused" in text and f"{first}, and 47 more" in text
    assert "150 services: 150 unreachable" in text and "No services are configured" not in text


def _card(i: int, state: str, **kw: Any) -> ServiceCard:
    return ServiceCard(service=f"svc{i:03d}", node=f"gpu-{i % 7}", state=state, state_words=f"{state} — words " * 40,
                       model="moonshotai/Kimi-K2.5-" + "x" * 300, warnings=["w" * 900] * 8, **kw)


def test_render_limits_with_long_texts_and_buttons() -> None:
    """Pure rendering: 1 and 150 services with every field long, Restart buttons everywhere."""
    for n in (1, 150):
        cards = [_card(i, ("failed", "loading", "ready", "stopped")[i % 4], may_restart=True, progress=0.45,
                       shards=(29, 64), elapsed_s=800.0, eta="~17 min remaining", generation_tps=1234.5,
                       running=3, waiting=1, kv_cache_usage=0.42, benchmark="82.5 tok/s single-stream " * 20)
                 for i in range(n)]
        view = view_dict(Dashboard(read_at=T0, services=cards, elapsed_s=1.2))
        assert view_problems(view, "home") == []
        assert len(view["blocks"]) <= 100
        restart = [b for b in buttons(view) if b["action_id"] == "home_restart"]
        assert restart and restart[0]["value"] == "svc000@gpu-0"
        if n == 150:
            assert "more services not shown" in all_text(view["blocks"])


def test_trouble_comes_first() -> None:
    from handlers.home import order_key

    states = ["stopped", "ready", "loading", "unhealthy", "failed"]
    cards = sorted([_card(i, s) for i, s in enumerate(states)], key=order_key)
    assert [c.state for c in cards] == ["failed", "unhealthy", "loading", "ready", "stopped"]


async def test_republished_on_change_paced_and_kept_in_the_store(fake_slack: FakeSlack, home_bot: Any,
                                                                 tmp_path: Path) -> None:
    config = fleet_config(tmp_path)
    h = await home_bot(config)
    http, rt, publisher, clock = h.http, h.rt, h.publisher, h.clock
    await http.post_event(home_opened(ALICE))
    await fake_slack.wait_for("views.publish", 1, within=10)
    await make_idle(publisher)

    async def change() -> None:
        # Exactly the call the follow job and the watcher make (handlers.notify.dashboards_changed).
        await dashboards_changed(rt.context(), "kimi@gpu-a")
        await publisher.idle()

    clock.advance(10)
    await change()  # 10 s after the last publish: paced
    assert len(fake_slack.calls_to("views.publish")) == 1
    clock.advance(21)  # 31 s: due
    await change()
    assert len(fake_slack.calls_to("views.publish")) == 2
    clock.advance(5)
    await change()
    await change()
    assert len(fake_slack.calls_to("views.publish")) == 2  # at most once per 30 s
    # Refresh always re-reads (the person asked).
    await click(http, "home_refresh", "refresh", ALICE)
    await fake_slack.wait_for("views.publish", 3, within=10)
    # The open dashboards and their pacing are in the database: a new publisher (a restarted bot) on the
    # same store knows ALICE has the tab open, and that she was just served.
    assert rt.store is not None
    other = HomePublisher(rt, publisher.poster, clock=clock)
    clock.advance(10)
    await other.changed("kimi@gpu-a")
    await other.idle()
    assert len(fake_slack.calls_to("views.publish")) == 3
    clock.advance(31)
    await other.changed("kimi@gpu-a")
    await other.idle()
    assert len(fake_slack.calls_to("views.publish")) == 4
    assert {c.body["user_id"] for c in fake_slack.calls_to("views.publish")} == {ALICE}
    other.close()
    # Someone who opened the tab long ago is not republished forever.
    clock.advance(13 * 3600)
    await change()
    assert len(fake_slack.calls_to("views.publish")) == 4
    assert not fake_slack.invalid_views


async def make_idle(publisher: HomePublisher) -> None:
    await publisher.idle()


async def test_restart_button_only_for_people_who_may_restart(fake_slack: FakeSlack, home_bot: Any,
                                                              make_cluster: MakeCluster) -> None:
    # A node that answers: the services of a down node are named on its line, with no card (nor button).
    cluster = await make_cluster({"gpu-a": kimi_node(fast=True, port=free_port())},
                                 access={"restart_users": [ALICE]})
    h = await home_bot(cluster.config)
    http = h.http
    await http.post_event(home_opened(ALICE))
    await http.post_event(home_opened(EVE))
    await fake_slack.wait_for("views.publish", 2, within=10)
    [alice] = published(fake_slack, ALICE)
    [eve] = published(fake_slack, EVE)
    assert [(b["action_id"], b["value"]) for b in buttons(alice) if b["action_id"] == "home_restart"] == [
        ("home_restart", "kimi@gpu-a")]
    assert not [b for b in buttons(eve) if b["action_id"] == "home_restart"]


async def test_unauthorised_restart_click_is_refused_in_a_dm_and_audited(fake_slack: FakeSlack, home_bot: Any,
                                                                          tmp_path: Path) -> None:
    h = await home_bot(fleet_config(tmp_path, access={"restart_users": [ALICE]}))
    http, rt = h.http, h.rt
    await click(http, "home_restart", "kimi@gpu-a", EVE)  # a forged or stale button
    [dm] = await fake_slack.wait_for("chat.postMessage", 1, within=10)
    assert [c.body["users"] for c in fake_slack.calls_to("conversations.open")] == [EVE]
    assert dm.body["channel"].startswith("D")
    text = all_text(dm.body["blocks"])
    assert "not allowed" in text and "Home tab" in text
    assert "restart_confirm" not in json.dumps(dm.body["blocks"])
    assert rt.store is not None
    entries = await rt.store.audit.recent("kimi")
    assert [e.event for e in entries] == ["restart.refused"] and entries[0].who == EVE
    # Allowed, but the node is unreachable: the same state checks as `restart kimi` refuse it, in her DM.
    await click(http, "home_restart", "kimi@gpu-a", ALICE)
    await fake_slack.wait_for("chat.postMessage", 2, within=10)
    second = fake_slack.calls_to("chat.postMessage")[1]
    assert "unreachable" in all_text(second.body["blocks"])
    assert not [e for e in await rt.store.audit.recent("kimi") if e.event in ("restart.requested", "restart.executed")]


# --------------------------------------------------------------------------------------------------------
# On the simulated node behind real sshd: a Home click asks exactly what `restart kimi` asks.


async def test_home_restart_click_posts_the_usual_confirmation_and_runs_nothing(slack_bot: Any) -> None:  # noqa: F811
    from test_restart_slack import BOB, OPS, OutageSlack, until

    fs = OutageSlack()
    b = await slack_bot(fs)
    assert b.rt.store is not None
    http = HttpApp(b.url, b.session)
    await http.post_event(home_opened(ALICE))
    await until(lambda: bool(published(fs, ALICE)), 30, "the Home view")
    view = published(fs, ALICE)[0]
    text = all_text(view["blocks"])
    assert "✅ *kimi* on *gpu-a* — ready" in text and "tok/s" in text and "KV cache" in text
    [restart] = [x for x in buttons(view) if x["action_id"] == "home_restart"]
    assert isinstance(b.rt.dashboards, HomePublisher)
    b.rt.dashboards.min_interval_s = 0.5  # so the load below is seen on the tab within the test

    await click(http, "home_restart", restart["value"], ALICE)
    await until(lambda: any("restart_confirm" in json.dumps(c.get("blocks", [])) for c in fs.delivered), 30,
                "the confirmation")
    body = next(c for c in fs.delivered if "restart_confirm" in json.dumps(c.get("blocks", [])))
    assert body["channel"] == OPS  # the configured restart channel (restart_channels), not the Home tab
    actions = next(blk for blk in body["blocks"] if blk["type"] == "actions")["elements"]
    assert [a["action_id"] for a in actions] == ["restart_confirm", "restart_cancel"]
    rid = actions[0]["value"]
    req = await b.rt.store.requests.get(rid)
    assert req is not None and req.state == "pending" and req.requested_by == ALICE and req.message_channel == OPS
    events = [e.event for e in await b.rt.store.audit.recent("kimi")]
    assert "restart.requested" in events and "restart.executed" not in events  # nothing ran
    # Only the usual confirmation runs it (same guard: BOB may confirm).
    await b.click("restart_confirm", rid, BOB, req.message_ts or "")
    await until(lambda: bool(fs.calls_to("chat.update")), 30, "the rewrite")

    async def executed() -> int:
        return len([e for e in await b.rt.store.audit.recent("kimi") if e.event == "restart.executed"])

    for _ in range(200):
        if await executed():
            break
        await fs.quiet(0.1)
    assert await executed() == 1
    # The follow job republishes the open dashboard as the load progresses, then when it is ready again.
    await until(lambda: any("— loading" in all_text(v["blocks"]) or "— starting" in all_text(v["blocks"])
                            for v in published(fs, ALICE)), 45, "a dashboard showing the load")
    n = len(published(fs, ALICE))
    await until(lambda: len(published(fs, ALICE)) > n and "— ready" in all_text(published(fs, ALICE)[-1]["blocks"]),
                45, "the dashboard back to ready")
    assert not fs.invalid_views
