"""A down node's reason once in Slack too (issue 22): ``status`` through the real Bolt app and the fake Slack."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from conftest import all_text, event_body, mention
from fake_slack import FakeSlack
from test_slack_home import fleet_config

from bot.app import runtime


async def test_status_of_a_thousand_services_on_a_down_node_says_its_reason_once(
        fake_slack: FakeSlack, make_app: Any, serve_http: Any, tmp_path: Path) -> None:
    async with runtime(fleet_config(tmp_path, n_services=1000), with_store=False) as rt:
        http = await serve_http(make_app(rt))
        await http.post_event(event_body(mention("status", ts="1700000000.000900")))
        calls = await fake_slack.wait_for("chat.postMessage", within=30)
        await fake_slack.quiet(0.5)
        posted = fake_slack.calls_to("chat.postMessage")
        assert calls and len(posted) == 1  # one short answer, not pages of the same line
        # The blocks, and the message's text (what notifications and a blocks-refused fallback show), alike.
        for text in (all_text(posted[0].body["blocks"]), str(posted[0].body["text"])):
            assert text.count("connection refused") == 1, text[:2000]
            assert "gpu-a unreachable" in text and "kimi, svc001, svc002, and 997 more" in text
            assert "svc500 on gpu-a" not in text  # no card per service
