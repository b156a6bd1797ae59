"""The recorded probe answers the modes replay: where they are, what was recorded, and how they are varied."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

SAMPLES = Path(__file__).resolve().parents[2] / "tests" / "samples" / "probe"  # recorded by `record` too
KIMI_UNIT = "vllm-kimi-k25-int4.service"  # services.sim.scenarios.KIMI_UNIT, without importing the simulator


def recording_meta(rec: Path) -> dict[str, Any]:
    """What ``record`` wrote beside the answers (the tests' samples have only the answers: the Kimi unit)."""
    path = rec / "meta.json"
    return json.loads(path.read_text()) if path.exists() else {"unit": KIMI_UNIT}


class Traffic:
    """The recorded watcher answer with token counters that grow on every poll (a server at work).

    A recording's counters never move, which would let the watcher skip every write of its memory; a busy
    server's generation counter moves between every two polls.
    """

    def __init__(self, stdout: str) -> None:
        # The light probe's wire format: the /metrics section rides in the one base64 line (WRAP).
        head, sep, rest = stdout.rpartition("\n@@inferbot@@ b64 ")
        blob, nl, after = rest.partition("\n")
        self._text = base64.b64decode(blob).decode() if sep else ""
        if " metrics " not in self._text:
            raise ValueError("the recording has no /metrics sample (record it with the server ready)")
        self._head, self._after = head + sep, nl + after
        self._polls = 0

    def next(self) -> str:
        """The answer of the next poll: 50 more generated and 150 more prompt tokens than the last."""
        self._polls += 1
        k = self._polls

        def bump(m: re.Match[str]) -> str:
            step = 50 if "generation" in m[1] else 150
            return f"{m[1]} {float(m[2]) + step * k}"

        text = re.sub(r"^(vllm:(?:generation|prompt)_tokens_total\S*) ([0-9.]+)$", bump, self._text, flags=re.M)
        return self._head + base64.b64encode(text.encode()).decode() + self._after


def session_answer(stdout: str) -> str:
    """What the watcher's persistent session prints for a recorded one-shot answer: the same answer, then the
    line ``<marker><its value> done`` (``services.node.probe.session_answer_end``)."""
    value = stdout.partition("\n@@inferbot@@")[2].partition(" ")[0]
    return f"{stdout}@@inferbot@@{value} done\n"
