"""What a contender's runs measured: one question asked of N nodes (``Run``), all runs at one N (``Result``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

END_MARK = "@@inferbot@@ end"
"""The probe's last line: an answer without it is incomplete."""


@dataclass
class Run:
    """One question asked of N nodes by one contender."""

    wall_s: float
    cpu_s: float  # client side: every process the contender ran, user+sys
    peak_rss_kib: int  # the largest single client process
    rss_sum_kib: int = 0  # the peaks of all client processes that ran at once, added up
    error: str | None = None


@dataclass
class Result:
    """All runs of one contender at one N."""

    contender: str
    nodes: int
    runs: list[Run] = field(default_factory=list)
    unavailable: str | None = None
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    cluster: str = "simulated"  # the nodes asked: "simulated" (bench.cluster) or "cheap" (bench.cheap)
