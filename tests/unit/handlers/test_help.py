"""handlers/help.py: help is generated from the command table and hides what the asker may not do."""

from __future__ import annotations

from bot.app import runtime
from bot.dispatch import answer
from config.loader import parse_config
from handlers.commands import COMMANDS
from handlers.context import Asker
from handlers.help import HELP_ORDER, MAX_SUGGESTIONS, SUGGEST_ACTION, suggestion_actions

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


async def test_the_table_comes_from_the_commands_everyday_questions_first(tmp_path) -> None:
    config = parse_config(CFG.replace("{dir}", str(tmp_path)))
    async with runtime(config) as rt:
        reply = await answer("help", rt.context(Asker(surface="cli")))
    [table, hint] = reply.sections
    shown = [row[0] for row in table.rows or []]
    assert shown == reply.data["commands"]
    assert shown[:len(HELP_ORDER)] == [c for c in HELP_ORDER if c in shown]  # the terminal may restart
    assert "restart" in shown and "help" not in shown
    hidden = {c.name for c in COMMANDS if c.hidden}
    assert set(shown) == {c.name for c in COMMANDS} - hidden - {"help"}
    kimi_row = next(row for row in table.rows or [] if row[0] == "status")
    assert kimi_row[1] == next(c.summary for c in COMMANDS if c.name == "status")
    assert hint.text == "Name a service or node to narrow the answer — services: kimi; nodes: gpu-a"


async def test_what_it_cannot_place_gets_two_lines_never_the_table(tmp_path) -> None:
    config = parse_config(CFG.replace("{dir}", str(tmp_path)))
    async with runtime(config) as rt:
        lost = await answer("asdf qwer zxcv", rt.context(Asker(surface="cli")))
    assert (lost.intent, lost.ok, lost.error, lost.actions) == ("help", False, "not understood", [])
    assert [s.text for s in lost.sections] == ["Ask about a service — e.g. `status kimi`, `settings`, `throughput`.",
                                               "`help` for everything."]


def test_a_button_per_suggestion_two_at_most_each_with_its_own_id() -> None:
    buttons = suggestion_actions(["logs kimi", "status kimi", "gpus kimi"])
    assert [(a.action_id, a.text, a.value) for a in buttons] == [
        (SUGGEST_ACTION, "logs kimi", "logs kimi"), (f"{SUGGEST_ACTION}_2", "status kimi", "status kimi")]
    assert MAX_SUGGESTIONS == 2 and suggestion_actions([]) == []
