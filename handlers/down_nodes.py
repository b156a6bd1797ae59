"""Nodes that did not answer, said once each: the reason, the fix, and the services they took with them.

When a node is down every service on it is "unreachable" for the same reason. An answer that listed each
such service with its own card repeated that reason once per service (1,000 times for 1,000 services on a
down node); it now says it once, on one card per node — ``gpu-a unreachable`` / ``connection refused on
10.0.0.5:22 — kimi, qwen, llama, and 997 more`` / ``Fix: …`` — where the node's first service would have been.
Only cards are grouped: ``data.services[]`` keeps one object per service (each ``unreachable`` with its
reason), and ``data.nodes[]`` names the services of each node (``services``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from handlers.reply import Section
from services.cluster import NodeReport

NAMES_SHOWN = 3
"""How many service names a down node's card spells out before "and N more" (``data`` lists them all)."""


def names_words(names: Sequence[str], shown: int = NAMES_SHOWN) -> str:
    """``kimi``, ``kimi and qwen``, ``kimi, qwen, and llama``, ``kimi, qwen, llama, and 997 more``."""
    if len(names) <= 2:
        return " and ".join(names)
    if len(names) <= shown:
        return ", ".join(names[:-1]) + f", and {names[-1]}"
    return ", ".join(names[:shown]) + f", and {len(names) - shown:,} more"


def node_down_sections(report: NodeReport, services: Sequence[str]) -> list[Section]:
    """The one card of a node that did not answer: its reason once, the services on it, the fix."""
    reason = report.error.reason if report.error else "no answer"
    fix = report.error.fix if report.error else ""
    out = [Section(kind="header", title=node_words(report), status="warn" if _busy(report) else "error"),
           Section(kind="text", text=f"{reason} — {names_words(services)}" if services else reason)]
    if fix:
        out.append(Section(kind="context", title="Fix", text=fix))  # as a service card's (common.warnings_section)
    return out


def _busy(report: NodeReport) -> bool:
    return report.error is not None and report.error.kind == "busy"


def node_words(report: NodeReport) -> str:
    """``gpu-a unreachable``, or ``gpu-a not asked (inferbot is busy)`` when the bot itself had no room to ask it:
    a busy bot never blames the node."""
    return f"{report.node} not asked (inferbot is busy)" if _busy(report) else f"{report.node} unreachable"


class DownNodes:
    """The nodes of an answer that did not answer, and which of its services each one took with it.

    Handlers that go service by service ask :meth:`card` at each service: a down node's card comes once,
    at its first service, and the service's own card is left out (or, where it has more to say than the
    node's reason — history, the audit log —, keeps only that).
    """

    def __init__(self, nodes: Iterable[NodeReport], services: Iterable[tuple[str, str]]) -> None:
        self.reports = {n.node: n for n in nodes if not n.ok}
        self.services: dict[str, list[str]] = {node: [] for node in self.reports}
        for service, node in services:
            names = self.services.get(node)
            if names is not None:
                names.append(service)
        self._said: set[str] = set()

    def __contains__(self, node: object) -> bool:
        return node in self.reports

    def words(self, node: str) -> str:
        """What happened to ``node`` in a few words (see :func:`node_words`)."""
        return node_words(self.reports[node])

    def card(self, node: str) -> list[Section]:
        """The down node's card the first time it is asked for; nothing afterwards (and for a node that answered)."""
        report = self.reports.get(node)
        if report is None or node in self._said:
            return []
        self._said.add(node)
        return node_down_sections(report, self.services[node])

    def rest(self) -> list[Section]:
        """The cards not given yet (down nodes none of whose services was shown, e.g. discovery nodes)."""
        out: list[Section] = []
        for node in self.reports:
            out += self.card(node)
        return out
