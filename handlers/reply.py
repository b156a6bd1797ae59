"""``Reply``: what every handler returns; ``bot/`` renders it for Slack, the terminal or JSON."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["ok", "info", "warn", "error", "loading"]


class Section(BaseModel):
    """One piece of an answer. Renderers decide how each kind looks; none of them may drop content."""

    model_config = ConfigDict(extra="forbid")

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
    data: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None

    def to_json(self, text: str) -> dict[str, Any]:
        """The ``--json`` object: ``intent``, ``ok``, ``text`` (the plain answer), ``data``."""
        out: dict[str, Any] = {"intent": self.intent, "ok": self.ok, "text": text, "data": self.data}
        if self.error:
            out["error"] = self.error
        return out
