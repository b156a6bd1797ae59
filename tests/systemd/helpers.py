"""Asking the real bot over real SSH, and collecting every output path a secret could take."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.app import runtime
from bot.dispatch import answer
from bot.render_text import render_text
from bot.slack.blocks import render_messages
from config.models import BotConfig
from handlers.context import Asker


@dataclass
class Answer:
    """One question's answer in every form a user or an operator can see."""

    json: dict[str, Any]
    text: str
    slack: str  # the Slack messages (blocks and attachments) as JSON

    def service(self, name: str | None = None) -> dict[str, Any]:
        """The ``data.services`` entry for ``name`` (the only one when ``name`` is None)."""
        services: list[dict[str, Any]] = self.json["data"]["services"]
        if name is None:
            assert len(services) == 1, services
            return services[0]
        return next(s for s in services if s.get("name") == name or s.get("service") == name)

    def everything(self) -> str:
        """All of it as one string (for "the secret is nowhere")."""
        return "\n".join((json.dumps(self.json, ensure_ascii=False), self.text, self.slack))


async def ask(config: BotConfig, text: str) -> Answer:
    """``inferbot ask --json TEXT`` in-process (the same runtime, dispatch and renderers as the CLI)."""
    async with runtime(config) as rt:
        reply = await answer(text, rt.context(Asker(surface="json")))
    out = render_text(reply)
    slack = json.dumps([{"text": m.text, "blocks": m.block_dicts()} for m in render_messages(reply)],
                       ensure_ascii=False)
    return Answer(json=reply.to_json(out), text=out, slack=slack)


def state_bytes(state_dir: Path) -> bytes:
    """The raw bytes of every file of the state database (db, journal and WAL files included)."""
    return b"".join(p.read_bytes() for p in sorted(state_dir.rglob("*")) if p.is_file())
