"""``Reply``: what every handler returns; ``bot/`` renders it for Slack, the terminal or JSON."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.dataclasses import dataclass

from services import mentions

Status = Literal["ok", "info", "warn", "error", "loading"]


@dataclass(slots=True, config=ConfigDict(extra="forbid"))
class Section:
    """One piece of an answer. Renderers decide how each kind looks; none of them may drop content.

    A validated dataclass with slots, not a model: an answer about hundreds of services holds thousands of
    sections, and a model's per-instance dictionary and set of field names were half of each one's size.
    """

    kind: Literal["header", "text", "fields", "table", "code", "context", "divider"]
    title: str | None = None
    text: str | None = None
    status: Status | None = None  # for headers: drives the emoji
    fields: list[tuple[str, str]] = Field(default_factory=list)
    headers: list[str] = Field(default_factory=list)
    rows: list[list[str]] = Field(default_factory=list)


class Action(BaseModel):
    """A button (Slack) — the terminal shows what it would do instead."""

    model_config = ConfigDict(extra="forbid")

    action_id: str
    text: str
    value: str
    style: Literal["primary", "danger"] | None = None


class Attachment(BaseModel):
    """Long output that Slack should get as a file upload rather than a message."""

    model_config = ConfigDict(extra="forbid")

    filename: str
    title: str
    content: str


class ChartSeries(BaseModel):
    """One line, step line or bar stack of a chart: ``y`` against ``x`` (times) or the chart's categories."""

    model_config = ConfigDict(extra="forbid")

    name: str  # the legend entry, with its unit where panels mix units
    y: list[float | None]  # None: no value there (the line breaks)
    x: list[datetime] = Field(default_factory=list)  # empty: one value per category of the chart
    style: Literal["line", "step", "bar", "points"] = "line"
    muted: bool = False  # drawn in grey (e.g. "phase unknown")


class ChartPanel(BaseModel):
    """One plot area with its own y axis; panels are stacked and share the x axis."""

    model_config = ConfigDict(extra="forbid")

    ylabel: str
    series: list[ChartSeries]
    hlines: list[tuple[float, str]] = Field(default_factory=list)  # (y, label): a reference line


class ChartMarker(BaseModel):
    """A moment marked across every panel (a restart)."""

    model_config = ConfigDict(extra="forbid")

    at: datetime
    label: str


class Chart(BaseModel):
    """A picture of some numbers, as data: ``bot/`` draws it (PNG) for Slack and the terminal."""

    model_config = ConfigDict(extra="forbid")

    filename: str
    title: str
    subtitle: str = ""
    alt_text: str
    xlabel: str
    panels: list[ChartPanel]
    categories: list[str] = Field(default_factory=list)  # bar charts: one label per bar
    markers: list[ChartMarker] = Field(default_factory=list)
    gap_s: float | None = None  # lines break across gaps between samples longer than this
    width_px: int = 1000  # Slack's preview size
    height_px: int = 500


class Reply(BaseModel):
    """A whole answer: title, status, sections, optional buttons, and the same facts as plain data."""

    model_config = ConfigDict(extra="forbid")

    intent: str
    ok: bool = True
    title: str
    status: Status = "info"
    sections: list[Section] = Field(default_factory=list)
    actions: list[Action] = Field(default_factory=list)
    attachments: list[Attachment] = Field(default_factory=list)
    chart: Chart | None = None  # drawn by bot/ (PNG upload in Slack, --png in the terminal)
    data: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None

    def to_json(self, text: str) -> dict[str, Any]:
        """The ``--json`` object: ``intent``, ``ok``, ``text`` (the plain answer), ``data``."""
        # JSON shows the bot's own mentions as text (``<@U…>``), as the terminal does.
        out: dict[str, Any] = {"intent": self.intent, "ok": self.ok, "text": mentions.plain(text),
                               "data": mentions.plain_data(self.data)}
        if self.error:
            out["error"] = mentions.plain(self.error)
        return out
