"""Answer one question and print it: shared by `inferbot ask` and `inferbot demo`."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from bot.app import runtime
from bot.dispatch import answer
from bot.errors import UsageError
from bot.render_text import render_text
from bot.terminal import json_shown, shown_line
from config.models import BotConfig
from handlers.context import Asker
from handlers.reply import Reply

EXIT_OK = 0


def emit(reply: Reply, as_json: bool) -> None:
    """Print a reply as text or as the ``--json`` object."""
    text = render_text(reply)
    if as_json:
        print(json_shown(json.dumps(reply.to_json(text), ensure_ascii=False, indent=2)))
    else:
        print(text, end="")


async def ask(config: BotConfig, question: str, as_json: bool, png: str | None = None) -> int:
    """Answer one question against ``config`` and print it (and write its chart to ``png``, if asked)."""
    # The store opens in a worker thread while the question is routed and the nodes asked (bot.app.runtime).
    async with runtime(config, store_soon=True) as rt:
        reply = await answer(question, rt.context(Asker(surface="json" if as_json else "cli")))
    if png is not None:
        await write_chart(reply, png)
    emit(reply, as_json)
    return EXIT_OK


async def write_chart(reply: Reply, path: str) -> None:
    """Draw the reply's chart into ``path`` (a note on stderr when the answer has none)."""
    if reply.chart is None:
        print("inferbot: this answer has no chart; nothing written to " + shown_line(path), file=sys.stderr)
        return
    from bot.render_chart import render_png  # matplotlib only when a chart is drawn

    png = await asyncio.to_thread(render_png, reply.chart)
    try:
        await asyncio.to_thread(Path(path).write_bytes, png)
    except OSError as e:
        raise UsageError(f"could not write the chart to {path}: {e.strerror or e}") from None
    reply.data["png"] = {"file": path, "bytes": len(png), "width": reply.chart.width_px,
                         "height": reply.chart.height_px}
