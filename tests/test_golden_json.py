"""Golden test: the ``--json`` answer of every intent on the simulated cluster, normalised and compared.

Written before the restructure so that moving modules cannot change what a user sees. What legitimately
varies between runs (times, durations, PIDs, ports, temp paths, progress numbers, ids) is replaced by
placeholders, by key name and by pattern. ``INFERBOT_UPDATE_GOLDEN=1`` rewrites the golden files.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from pathlib import Path
from typing import Any

from bot.app import runtime
from bot.dispatch import answer
from bot.render_text import render_text
from config.models import BotConfig
from handlers.context import Asker
from services.sim.scenarios import KIMI_UNIT
from tests.conftest import MakeCluster, SimCluster
from tests.test_e2e_live import wait_journal
from tests.test_e2e_settings import kimi

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("INFERBOT_UPDATE_GOLDEN") == "1"
ALICE = "U0ALICE01"
OPS = "C0OPS0001"

QUESTIONS: dict[str, tuple[str, str]] = {
    "settings": ("json", "what are the settings of kimi on gpu-a?"),
    "status": ("json", "status of kimi on gpu-a"),
    "throughput": ("json", "throughput kimi on gpu-a"),
    "gpus": ("json", "gpus on gpu-a"),
    "logs": ("json", "logs kimi on gpu-a"),
    "changes": ("json", "what changed on kimi on gpu-a?"),
    "compare": ("json", "compare kimi on gpu-a and gpu-b"),
    "audit": ("json", "audit"),
    "help": ("json", "help"),
    "restart_terminal": ("json", "restart kimi on gpu-a"),
    "restart_slack": ("slack", "restart kimi on gpu-a"),
    "restarts": ("json", "when did kimi on gpu-a last restart?"),
    "flag": ("json", "what is --max-model-len of kimi on gpu-a?"),
    "unlock": ("json", "unlock kimi on gpu-a"),
    "chart_throughput": ("json", "chart throughput kimi last 1h"),
    "chart_loads": ("json", "chart loads kimi"),
    "unknown": ("json", "status of nosuchthing"),
    "change_slack": ("slack", "set max-num-seqs 256 on kimi on gpu-a"),
    "change_terminal": ("json", "set max-num-seqs 256 on kimi on gpu-a"),
    "change_refused": ("slack", "set max-num-seq 256 on kimi on gpu-a"),
    "revert_slack": ("slack", "revert kimi on gpu-a"),
}

_VARY_KEYS = re.compile(
    r"(^|_)(ts|at|time|since|started|ended|when|eta|seconds|elapsed|duration|pid|port|id|uptime|age|"
    r"fraction|percent|progress|tokens|tps|rate|value|values|points|x|y|util|memory|mem|temp|power|"
    r"lines|line|host|path|file|dir|log|journal)s?$", re.I)
_PATTERNS = [
    # journal lines are whole lines whose content depends on how long the node has been polled
    (re.compile(r"^ *\S+ \S+ vllm\[\d+\]: .*$", re.M), "<journal line>"),
    (re.compile(r", \d+ s old\)"), ")"),  # the age of the stats line is shown only once it is a second old
    (re.compile(r"/tmp/[^\s\"',)]+"), "<tmp>"),
    (re.compile(r"\d{4}-\d\d-\d\d[T ][\d:.]+(?:[+-]\d\d:?\d\d|Z)?"), "<time>"),
    (re.compile(r"\b\d\d:\d\d(?::\d\d)?\b"), "<clock>"),
    (re.compile(r"\d+(?:\.\d+)?"), "<n>"),
    # table columns widen with a 5-digit PID or a longer number: the padding is not what a user reads
    (re.compile(r"-{2,}"), "--"),
    (re.compile(r" {2,}"), "  "),
]


def normalise(value: Any, key: str = "") -> Any:
    """Replace what varies between runs with placeholders; keep the shape and the words."""
    if isinstance(value, dict):
        return {k: normalise(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v, key) for v in value]
    if _VARY_KEYS.search(key) and value is not None and not isinstance(value, bool):
        return f"<{type(value).__name__}>"
    if isinstance(value, str):
        for pattern, repl in _PATTERNS:
            value = pattern.sub(repl, value)
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "<n>"
    return value


async def _ask(cluster: SimCluster, surface: str, text: str) -> dict[str, Any]:
    async with runtime(cluster.config) as rt:
        asker = (Asker(surface="slack", user_id=ALICE, channel_id=OPS) if surface == "slack"
                 else Asker(surface="json"))
        reply = await answer(text, rt.context(asker))
    out = render_text(reply)
    data: dict[str, Any] = reply.to_json(out)
    return data


async def test_every_intent_json_matches_golden(make_cluster: MakeCluster) -> None:
    cluster = await make_cluster({"gpu-a": kimi(), "gpu-b": kimi()},
                                 access={"restart_users": [ALICE]})
    data = cluster.config.model_dump()
    for svc in data["services"]:  # issue 25: settings changes on (the preview only; nothing is confirmed)
        svc["changes"] = {"enabled": True}
    cluster.config = BotConfig.model_validate(data)
    await cluster.sims["gpu-a"].wait_for(KIMI_UNIT, "ready", 45)
    await cluster.sims["gpu-b"].wait_for(KIMI_UNIT, "ready", 45)
    for node in ("gpu-a", "gpu-b"):  # the live throughput comes from the first stats line
        await wait_journal(cluster, node, "Avg prompt throughput")
    GOLDEN.mkdir(exist_ok=True)
    mismatched: list[str] = []
    diffs: list[str] = []
    for name, (surface, text) in QUESTIONS.items():
        got = normalise(await _ask(cluster, surface, text))
        path = GOLDEN / f"{name}.json"
        rendered = json.dumps(got, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        if UPDATE:
            path.write_text(rendered)
            continue
        if path.read_text() != rendered:
            mismatched.append(name)
            diffs.extend(difflib.unified_diff(path.read_text().splitlines(), rendered.splitlines(),
                                              f"golden/{name}.json", "got", lineterm="", n=1))
    assert not mismatched, f"golden mismatch: {mismatched}\n" + "\n".join(diffs)
