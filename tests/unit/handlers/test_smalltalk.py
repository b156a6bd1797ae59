"""handlers/smalltalk.py: a thank-you, a greeting or a lone emoji gets one line back, never the help table."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.app import runtime
from bot.dispatch import answer
from bot.render_text import render_text
from config.loader import parse_config
from handlers.context import Asker
from handlers.smalltalk import LINE
from tests.unit.handlers.test_help import CFG


@pytest.mark.parametrize("text", ["thanks!", "thank you @inferbot", "hi", "👍", "🤖🤖🤖"])
async def test_one_line_back(tmp_path: Path, text: str) -> None:
    async with runtime(parse_config(CFG.replace("{dir}", str(tmp_path)))) as rt:
        reply = await answer(text, rt.context(Asker(surface="cli")))
    assert (reply.intent, reply.ok, reply.title, reply.sections, reply.actions) == ("smalltalk", True, LINE, [], [])
    assert render_text(reply).strip() == "ℹ️ Anytime! Ask me about a service (e.g. “status kimi”), or say “help”."
