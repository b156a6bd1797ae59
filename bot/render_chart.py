"""Draw a :class:`~handlers.reply.Chart` as a PNG with matplotlib.

matplotlib is imported inside :func:`render_png` only: every other command pays neither its import
time nor its memory. The Agg backend and the object-oriented API (no pyplot, no global figure state)
make drawing safe in a worker thread. Colours are Okabe–Ito's colour-blind-safe set; times are UTC.
"""

from __future__ import annotations

import io
import math
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from handlers.reply import Chart, ChartPanel, ChartSeries

if TYPE_CHECKING:  # types only: importing matplotlib here would cost every command
    from matplotlib.axes import Axes

# Okabe & Ito (2008), "Color Universal Design": distinguishable with every common colour-vision deficiency.
OKABE_ITO = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442")
MUTED = "#999999"
DPI = 100


def _days(at: datetime) -> float:
    """matplotlib's date number (days since its default epoch, 1970-01-01 UTC)."""
    return at.timestamp() / 86400.0


def _with_gaps(xs: list[datetime], ys: list[float | None], gap_s: float | None) -> tuple[list[float], list[float]]:
    """NaN for missing values and across gaps longer than ``gap_s``: matplotlib breaks the line there."""
    out_x: list[float] = []
    out_y: list[float] = []
    for i, (x, y) in enumerate(zip(xs, ys, strict=True)):
        if gap_s is not None and i and (x - xs[i - 1]).total_seconds() > gap_s:
            out_x.append(_days(xs[i - 1] + (x - xs[i - 1]) / 2))
            out_y.append(math.nan)
        out_x.append(_days(x))
        out_y.append(math.nan if y is None else float(y))
    return out_x, out_y


def render_png(chart: Chart) -> bytes:
    """The chart as PNG bytes, exactly ``chart.width_px`` × ``chart.height_px`` pixels."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.dates as mdates
    from matplotlib.figure import Figure

    fig = Figure(figsize=(chart.width_px / DPI, chart.height_px / DPI), dpi=DPI, layout="constrained")
    axes = fig.subplots(len(chart.panels), 1, sharex=True, squeeze=False)[:, 0]
    title = chart.title + (f"\n{chart.subtitle}" if chart.subtitle else "")
    fig.suptitle(title, fontsize=13, fontweight="bold")
    colour = 0
    timed = not chart.categories
    for ax, panel in zip(axes, chart.panels, strict=True):
        colour = _draw_panel(ax, panel, chart, colour)
        ax.set_ylabel(panel.ylabel, fontsize=11)
        ax.grid(True, axis="y", alpha=0.3)
        ax.tick_params(labelsize=10)
        for i, m in enumerate(chart.markers if timed else []):
            ax.axvline(_days(m.at), color="#000000", linestyle="--", linewidth=1.2,
                       label=("restart" if ax is axes[0] and i == 0 else None))
            if ax is axes[0]:
                ax.annotate(m.label, (_days(m.at), 1.0), xycoords=("data", "axes fraction"),
                            rotation=90, va="top", ha="right", fontsize=8,
                            bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})
        if ax.get_legend_handles_labels()[0]:
            # Outside the plot, on the right: a legend inside would hide some of the data.
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=9, frameon=False)
        top = ax.get_ylim()[1]
        ax.set_ylim(0, top * 1.12)  # room for the value labels and marker names above the data
    last = axes[-1]
    last.set_xlabel(chart.xlabel, fontsize=11)
    if timed:
        locator = mdates.AutoDateLocator(tz=UTC, minticks=4, maxticks=10)  # type: ignore[no-untyped-call]
        last.xaxis.set_major_locator(locator)
        last.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))  # type: ignore[no-untyped-call]
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def _draw_panel(ax: Axes, panel: ChartPanel, chart: Chart, colour: int) -> int:
    """Draw one panel's series; returns the next colour index (colours differ across panels too)."""
    bottoms = [0.0] * len(chart.categories)
    positions = list(range(len(chart.categories)))
    k = 0
    for s in panel.series:
        c = MUTED if s.muted else OKABE_ITO[colour % len(OKABE_ITO)]
        colour += 0 if s.muted else 1
        if chart.categories:
            k = _draw_category_series(ax, s, c, positions, bottoms, k)
        else:
            xs, ys = _with_gaps(s.x, s.y, chart.gap_s)
            if s.style == "step":
                ax.step(xs, ys, where="post", color=c, linewidth=1.8, label=s.name)
            else:
                ax.plot(xs, ys, color=c, linewidth=1.8, label=s.name)
    if chart.categories:
        ax.set_xticks(positions, chart.categories)
        ax.set_xlim(-0.6, len(positions) - 0.4)
    for y, label in panel.hlines:
        ax.axhline(y, color="#000000", linestyle=":", linewidth=1.5, label=label)
    return colour


def _draw_category_series(ax: Axes, s: ChartSeries, c: str, positions: list[int], bottoms: list[float],
                          k: int) -> int:
    if s.style == "bar":
        heights = [0.0 if v is None else float(v) for v in s.y]
        ax.bar(positions, heights, bottom=bottoms, color=c, width=0.7, label=s.name,
               edgecolor="white", linewidth=0.5)
        for i, h in enumerate(heights):
            bottoms[i] += h
        return k
    # Points (with a thin line between them): each series a different marker shape too, so the two
    # series differ without colour.
    shapes = ("o", "s", "^", "D")
    xs = [p for p, v in zip(positions, s.y, strict=True) if v is not None]
    ys = [float(v) for v in s.y if v is not None]
    ax.plot(xs, ys, color=c, marker=shapes[k % len(shapes)], markersize=8, linewidth=1.2,
            label=s.name)
    for x, y in zip(xs, ys, strict=True):
        ax.annotate(f"{y:,.0f}" if y >= 100 else f"{y:,.1f}", (x, y), textcoords="offset points",
                    xytext=(0, 8), ha="center", fontsize=8)
    return k + 1
