"""The benchmark's chart: wall time per question against N for every contender, log scale on both axes (PNG)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

# One colour per contender, one line style per kind of node: the same contender on simulated and on
# cheap nodes reads as one family.
COLORS = {"inferbot warm": "#1f77b4", "inferbot cold": "#9467bd", "OpenSSH parallel mux": "#d62728",
          "OpenSSH sequential": "#ff7f0e", "Ansible ad-hoc": "#7f7f7f"}
STYLES = {"cheap": ("-", "o"), "simulated": ("--", "s")}


def series(results: list[dict[str, Any]]) -> dict[tuple[str, str], list[tuple[int, float, float, float]]]:
    """(contender, nodes kind) -> [(N, median, min, max)] of the runs without errors, sorted by N."""
    out: dict[tuple[str, str], list[tuple[int, float, float, float]]] = {}
    for r in results:
        w = r.get("wall_s") or {}
        if r.get("unavailable") or "median" not in w:
            continue
        key = (r["contender"], r.get("cluster", "simulated"))
        out.setdefault(key, []).append((int(r["nodes"]), float(w["median"]), float(w["min"]), float(w["max"])))
    return {k: sorted(v) for k, v in out.items()}


def draw(results: list[dict[str, Any]], path: Path, title: str = "") -> bool:
    """Draw the chart into ``path`` (PNG, 1100×650); False when there is nothing to draw."""
    data = series(results)
    if not data:
        return False
    import matplotlib

    matplotlib.use("Agg")  # no display: files only
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 6.5), dpi=100)
    try:
        for (contender, kind), pts in sorted(data.items(), key=lambda kv: (kv[0][1], kv[0][0])):
            ns = [p[0] for p in pts]
            med = [p[1] for p in pts]
            lo = [p[1] - p[2] for p in pts]
            hi = [p[3] - p[1] for p in pts]
            line, marker = STYLES.get(kind, ("-.", "^"))
            ax.errorbar(ns, med, yerr=[lo, hi], linestyle=line, marker=marker, capsize=3, linewidth=1.6,
                        markersize=5, color=COLORS.get(contender), label=f"{contender} ({kind} nodes)")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        all_n = sorted({p[0] for pts in data.values() for p in pts})
        ax.set_xticks(all_n)
        ax.set_xticklabels([str(n) for n in all_n])
        ax.set_xlabel("N (nodes asked at once)")
        ax.set_ylabel("wall time per question, s (median; bars: min–max)")
        sub = "\n".join(textwrap.wrap(title, 120))
        ax.set_title("“what are current settings?” — wall time against N" + (f"\n{sub}" if sub else ""),
                     fontsize=10)
        ax.grid(True, which="both", linewidth=0.4, alpha=0.5)
        ax.legend(fontsize=8, loc="upper left")
        fig.text(0.99, 0.01, "nodes, sshd and client share one 2-core machine; cheap nodes replay a recorded answer",
                 ha="right", va="bottom", fontsize=7, color="#555555")
        fig.tight_layout()
        fig.savefig(path, format="png")
    finally:
        plt.close(fig)
    return True
