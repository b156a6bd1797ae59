"""A message as the person wrote it: Slack's markup undone, its structure kept.

Quoted lines, code and struck-through text are *marked*, not dropped: a restart written in any of them is
not an order (``orders``). Mentions of people, channels and groups are never names and go; a link keeps
its label; emoji (``:shortcode:`` or the character) are kept apart, so they never stand where a word does.
"""

from __future__ import annotations

import html
import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

MAX_MESSAGE = 4000  # Slack's own limit is higher; a question longer than this is pasted noise
Surface = Literal["slack", "terminal"]

# <@U123>, <@U123|name>, <#C123|ops>, <!here>, <!subteam^S123|@infra>: never a name, never a word.
_ENTITY = re.compile(r"<[@#!][^<>]*>")
_LINK = re.compile(r"<((?:https?|mailto|ftp):[^<>|]*)(?:\|([^<>]*))?>")
_CODE_BLOCK = re.compile(r"```(.*?)(?:```|$)", re.S)
_CODE = re.compile(r"`([^`\n]+)`")
_STRIKE = re.compile(r"(?<![\w~])~([^~\n]+)~(?![\w~])")
_BOLD = re.compile(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])")
_ITALIC = re.compile(r"(?<![\w_])_([^_\n]+)_(?![\w_])")
# Never inside a clock ("03:12:44"): a shortcode starts after no letter or digit.
_SHORTCODE = re.compile(r"(?<![A-Za-z0-9]):([a-z0-9_+'-]+(?:::skin-tone-\d)?):")
_QUOTE_LINE = re.compile(r"^\s*>\s?")


@dataclass(frozen=True, slots=True)
class Segment:
    """A run of text and how it was written."""

    text: str
    quoted: bool = False
    code: bool = False
    struck: bool = False
    pasted: bool = False  # a pasted log line or table row (read like code; its words name no setting asked about)

    @property
    def marked(self) -> bool:
        """Quoted, code or struck through: said about, not said."""
        return self.quoted or self.code or self.struck


@dataclass(frozen=True, slots=True)
class Message:
    """A message read once: its segments in order, its emoji, and where it came from."""

    segments: tuple[Segment, ...]
    emoji: tuple[str, ...] = ()
    surface: Surface = "terminal"
    to_other: bool = False  # it starts with another person's mention: addressed to them, not to the bot
    # Another person's mention beside the bot's at the start ("<@bot> <@anika> can you bounce qwen"): a request in
    # it may be to them, so it is never an order; a report ("<@bot> <@anika> says …") is still to the bot.
    beside_other: bool = False
    raw: str = ""  # as it arrived (a settings change's values are taken from it as typed: change_words.py)

    @property
    def plain(self) -> str:
        """The whole text as a person reads it (marks dropped), on one line per line."""
        return "".join(s.text for s in self.segments).replace(PART, " ").strip()

    @property
    def empty(self) -> bool:
        """Nothing but space (emoji aside)."""
        return not self.plain


# An emoji between words parts them like a comma ("kimi's dead again :skull: restart it"): it stays in the
# segments as this invisible separator, which the words read as a comma and the plain text drops.
PART = "\u2063"
# Emoji that ask a question of their own ("📈 kimi 24h", ":thermometer: gpu-a"): read as the words they stand
# for. Every other emoji stays apart from the words (a reaction, a mood, a doubt).
EMOJI_WORDS = {"chart_with_upwards_trend": "throughput chart", "chart_with_downwards_trend": "throughput chart",
               "bar_chart": "chart", "thermometer": "gpu temperature", "scroll": "logs", "page_facing_up": "logs",
               "hourglass": "eta", "hourglass_flowing_sand": "eta", "stopwatch": "latency",
               "straight_ruler": "max model len", "triangular_ruler": "max model len"}


def _emoji_chars(text: str, found: list[str]) -> str:
    """Pictographs out of ``text`` into ``found`` (by their Unicode name)."""
    out: list[str] = []
    for ch in text:
        if unicodedata.category(ch) == "So" or ch in "\u200d\ufe0f":
            if ch not in "\u200d\ufe0f":
                name = unicodedata.name(ch, "emoji").lower()
                found.append(name)
                out.append(f" {EMOJI_WORDS[name.replace(' ', '_')]} " if name.replace(" ", "_") in EMOJI_WORDS
                           else f" {PART} ")
                continue
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def _inline(text: str, quoted: bool, out: list[Segment]) -> None:
    """Split one piece of text into code, struck and plain segments."""
    pos = 0
    marks = sorted([(m.start(), m.end(), m.group(1), "code") for m in _CODE.finditer(text)]
                   + [(m.start(), m.end(), m.group(1), "strike") for m in _STRIKE.finditer(text)]
                   + [(m.start(), m.end(), m.group(1) or m.group(2), "quote") for m in _QUOTATION.finditer(text)])
    for start, end, inner, kind in marks:
        if start < pos:
            continue  # inside an earlier mark
        if start > pos:
            out.append(Segment(text[pos:start], quoted=quoted))
        out.append(Segment(inner, quoted=quoted or kind == "quote", code=kind == "code", struck=kind == "strike"))
        pos = end
    if pos < len(text):
        out.append(Segment(text[pos:], quoted=quoted))


# Words in quotation marks are said about, not said ('"restart kimi" is what the alert said'): "…", “…”, and
# '…' that opens and closes outside a word (never the apostrophe of "it's").
_QUOTATION = re.compile(r"[\"\u201c]([^\"\u201c\u201d\n]+)[\"\u201d]|(?<![\w'])'([^'\n]+?)'(?![\w'])")
_LEADING_USERS = re.compile(r"^(?:\s*<@[UW][A-Z0-9]+(?:\|[^>]*)?>)+")
_USER = re.compile(r"<@([UW][A-Z0-9]+)")


def read(text: str, surface: Surface = "terminal", bot_user_id: str | None = None) -> Message:
    """Read ``text`` as it arrives from ``surface``: Slack's ``event.text`` or what was typed after ``ask``.

    ``bot_user_id``: the bot's own Slack id; a message that starts with someone else's mention is addressed to
    them (without the id, no one's); one beside the bot's is ``beside_other``.
    """
    text = raw = (text or "")[:MAX_MESSAGE].replace("\r\n", "\n")
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    lead = _LEADING_USERS.match(text)
    leading = _USER.findall(lead.group(0)) if lead is not None and bot_user_id is not None else []
    to_other = bool(leading) and leading[0] != bot_user_id
    beside_other = any(u != bot_user_id for u in leading)
    emoji: list[str] = []
    text = _LINK.sub(lambda m: f" {m.group(2)} " if m.group(2) else " ", text)
    text = _ENTITY.sub(" ", text)
    # Slack escapes exactly these three; a terminal's text is taken as typed.
    unescape = html.unescape if surface == "slack" else (lambda s: s)

    # Inside code or quotation marks a shortcode is part of what is quoted (a value, a line): left as typed.
    quoted = [(q.start(), q.end()) for rx in (_CODE_BLOCK, _CODE, _QUOTATION) for q in rx.finditer(text)]

    def shortcode(m: re.Match[str]) -> str:
        if any(a < m.start() < b for a, b in quoted):
            return m.group(0)
        emoji.append(m.group(1))
        return f" {EMOJI_WORDS[m.group(1)]} " if m.group(1) in EMOJI_WORDS else f" {PART} "

    text = _SHORTCODE.sub(shortcode, text)
    text = _emoji_chars(text, emoji)
    segments: list[Segment] = []
    pos = 0
    for m in _CODE_BLOCK.finditer(text):
        _lines(unescape(text[pos:m.start()]), segments)
        segments.append(Segment("\n" + unescape(m.group(1)) + "\n", code=True))
        pos = m.end()
    _lines(unescape(text[pos:]), segments)
    cleaned = tuple(Segment(_BOLD.sub(r"\1", _ITALIC.sub(r"\1", s.text)) if not s.code else s.text,
                            s.quoted, s.code, s.struck, s.pasted) for s in segments if s.text)
    return Message(segments=cleaned, emoji=tuple(emoji), surface=surface, to_other=to_other,
                   beside_other=beside_other, raw=raw)


# A pasted log line or table row, read like code: vLLM's ("INFO 12-05 03:12:44 [loader.py:211] …", a worker's
# "(VllmWorker rank=0 pid=7) ERROR …"), the journal's ("Dec 05 03:12:44 gpu-a vllm[812]: …"), an ISO-stamped one.
_LOG_LINE = re.compile(
    r"^\s*(?:\([^)\n]*\)\s*)?(?:(?:INFO|WARNING|WARN|ERROR|DEBUG|CRITICAL)\s+\d{2}-\d{2}\s+\d{2}:\d{2}:\d{2}"
    r"|[A-Z][a-z]{2}\s+\d{1,2}\s+\d{2}:\d{2}:\d{2}\s+\S+\s+[\w@.-]+(?:\[\d+\])?:"
    r"|\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}"
    # a row of a pasted table (nvidia-smi's "+-----+", "| NVIDIA-SMI 550.54 … |")
    r"|[+|][-=+| ]*[^\n]*[|+]\s*$)")


def _lines(text: str, out: list[Segment]) -> None:
    """Quoted lines (``> …``, Slack's ``&gt;`` already unescaped) and pasted log lines apart from the others."""
    rest_quoted = False
    for line in text.split("\n"):
        if _LOG_LINE.match(line):
            out.append(Segment(line, code=True, pasted=True))
            out.append(Segment("\n"))
            continue
        if line.lstrip().startswith(">>>"):
            rest_quoted, line = True, line.lstrip()[3:]
        quoted = rest_quoted or bool(_QUOTE_LINE.match(line))
        if quoted and not rest_quoted:
            line = _QUOTE_LINE.sub("", line, count=1)
        _inline(line, quoted, out)
        out.append(Segment("\n"))
    if out and out[-1].text == "\n":
        out.pop()


def plain_text(text: str, surface: Surface = "slack") -> str:
    """The question as the person typed it, markup undone, on one line (what logs and reasons show)."""
    return " ".join(read(text, surface).plain.split())
