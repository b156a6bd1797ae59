"""A chart asked in Slack: the summary in the thread, then the PNG through the external upload flow."""

from __future__ import annotations

import struct
from datetime import UTC, datetime, timedelta
from pathlib import Path

from conftest import all_text, event_body, mention
from fake_slack import FakeSlack

from bot.app import runtime
from bot.slack.app import state_of
from config.models import BotConfig, Node, Service, StateSettings
from tests.sshd import free_port

THREAD = "1700000000.000777"


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return int(width), int(height)


async def test_chart_is_uploaded_into_the_asking_thread(fake_slack: FakeSlack, make_app, serve_http,
                                                        tmp_path: Path) -> None:
    cfg = BotConfig(nodes=[Node(name="gpu-a", host="127.0.0.1", port=free_port(), user="root", timeout=2.0)],
                    services=[Service(name="kimi", node="gpu-a", unit="vllm-kimi.service")],
                    state=StateSettings(dir=str(tmp_path / "state")))
    async with runtime(cfg) as rt:
        assert rt.store is not None
        now = datetime.now(UTC)
        for i in range(20):
            await rt.store.samples.record("kimi", "gpu-a", now - timedelta(minutes=20 - i),
                                          generation_total=6000.0 * i, prompt_total=12000.0 * i,
                                          running=4, waiting=1, kv_cache_usage=0.3)
        app = make_app(rt)
        http = await serve_http(app)
        await http.post_event(event_body(mention("chart throughput kimi last 6h", ts=THREAD)))
        [done] = await fake_slack.wait_for("files.completeUploadExternal", within=20)
        await state_of(app).drain(5)

    # The summary went into the thread first, with the numbers in words.
    [post] = fake_slack.calls_to("chat.postMessage")
    assert post.body["thread_ts"] == THREAD
    assert "generation 100.0 tok/s on average" in all_text(post.body["blocks"])
    # Then the three steps of files_upload_v2: ask for a URL, POST the bytes there, complete into the thread.
    [url_call] = fake_slack.calls_to("files.getUploadURLExternal")
    assert url_call.body["filename"] == "throughput-kimi-gpu-a.png"
    assert "generation and prompt tokens per second" in url_call.body["alt_txt"]
    [(file_id, data)] = fake_slack.uploads.items()
    assert int(url_call.body["length"]) == len(data)
    assert png_size(data) == (1000, 500)
    assert done.body["channel_id"] == "C0CHAN" and done.body["thread_ts"] == THREAD
    assert [f["id"] for f in done.body["files"]] == [file_id]
    assert done.body["files"][0]["title"] == "Throughput of kimi on gpu-a — last 6 h"


async def test_failed_chart_upload_says_so_in_the_thread(fake_slack: FakeSlack, make_app, serve_http,
                                                         tmp_path: Path) -> None:
    cfg = BotConfig(nodes=[Node(name="gpu-a", host="127.0.0.1", port=free_port(), user="root", timeout=2.0)],
                    services=[Service(name="kimi", node="gpu-a", unit="vllm-kimi.service")],
                    state=StateSettings(dir=str(tmp_path / "state")))
    fake_slack.fail_once("files.getUploadURLExternal", status=200, retry_after=None,
                         body={"ok": False, "error": "not_in_channel"})
    async with runtime(cfg) as rt:
        assert rt.store is not None
        now = datetime.now(UTC)
        for i in range(3):
            await rt.store.samples.record("kimi", "gpu-a", now - timedelta(minutes=3 - i),
                                          generation_total=600.0 * i, prompt_total=0.0, running=1,
                                          waiting=0, kv_cache_usage=0.1)
        app = make_app(rt)
        http = await serve_http(app)
        await http.post_event(event_body(mention("chart throughput kimi", ts=THREAD)))
        await fake_slack.wait_for("chat.postMessage", 2, within=20)
        await state_of(app).drain(5)
    texts = [c.body.get("text", "") for c in fake_slack.calls_to("chat.postMessage")]
    assert any("could not upload the chart: not_in_channel (invite me to the channel" in t for t in texts), texts
    assert not fake_slack.uploads
