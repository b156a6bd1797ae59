"""Help is generated from the command table and hides what the asker may not do."""

from __future__ import annotations

from bot.app import runtime
from bot.dispatch import answer
from config.loader import parse_config
from handlers.context import Asker

CFG = """
[[nodes]]
name = "gpu-a"
host = "127.0.0.1"
[[services]]
name = "kimi"
node = "gpu-a"
unit = "vllm-kimi.service"
[access]
restart_users = ["U0ALLOWED"]
[state]
dir = "{dir}"
"""


async def test_restart_hidden_unless_allowed(tmp_path) -> None:
    config = parse_config(CFG.replace("{dir}", str(tmp_path)))
    async with runtime(config) as rt:
        stranger = await answer("help", rt.context(Asker(surface="slack", user_id="U0STRANGER", channel_id="C1")))
        allowed = await answer("help", rt.context(Asker(surface="slack", user_id="U0ALLOWED", channel_id="C1")))
    assert "restart" not in stranger.data["commands"]
    assert "restart" in allowed.data["commands"]
    assert stranger.data["commands"][:3] == ["settings", "status", "throughput"]
    assert stranger.data["services"] == ["kimi"] and stranger.data["nodes"] == ["gpu-a"]
