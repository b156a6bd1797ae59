"""Render a ``Reply`` as Slack Block Kit messages, within Slack's limits and without dropping anything.

Blocks are built with ``slack_sdk.models.blocks`` and validated with ``to_dict()``, once: a message keeps
its blocks as the JSON text Slack receives, not as block objects or dicts, which hold the same content
several times over (an answer about a fleet runs to many messages), and slack_sdk converted the
objects again on every post. The limits slack_sdk does not check (blocks per message, characters per field,
total size of a message) are enforced here.
Anything too big for one block is split at line boundaries into several blocks, and blocks that do not fit
one message go on to the next message, each with its own plain-text fallback. A block that would still be
too big for a message whatever its source (its text grows when escaped for JSON) is drawn again as smaller
plain sections: nothing is cut, and rendering never fails on size.

Everything here is inert in Slack: every string is escaped (``&``, ``<``, ``>``), every mrkdwn text object
is ``verbatim`` (Slack links no raw URL or ``#channel`` in it) and the fallback text is escaped too; only the
mentions the bot built itself (``services.mentions``) become live ``<@U…>``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from slack_sdk.errors import SlackObjectFormationError
from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)
from tabulate import tabulate

from bot.render_text import EMOJI, render_section, render_table
from handlers.reply import Action, Attachment, Reply, Section
from services import mentions

# Slack's documented limits (Block Kit reference) and the reported size limit of one message.
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_FIELDS = 10
MAX_FIELD = 2000
MAX_HEADER = 150
MAX_CONTEXT_ELEMENT = 2000
MAX_CONTEXT_ELEMENTS = 10
MAX_ACTIONS = 25
MAX_BUTTON_TEXT = 75
MAX_BUTTON_VALUE = 2000
# Messages whose blocks total roughly 12-13k characters fail with ``msg_blocks_too_long``; we measure the
# serialised JSON of the blocks, which is always at least the text Slack counts.
MAX_MESSAGE_CHARS = 11_500
# Room kept in every message for the "continued" marker of a split answer.
_MARKER_CHARS = 400
# The most one block may weigh (its JSON) so that it fits a message with the marker: every block is made
# to fit this, whatever its source.
_PIECE_BUDGET = MAX_MESSAGE_CHARS - _MARKER_CHARS - 3
_TITLE_IN_MARKER = 200


class BlockLimitError(ValueError):
    """A rendered message breaks a Slack limit (a bug in this module: nothing should ever raise it)."""


BlockDict = dict[str, Any]
"""One validated block as the JSON Slack receives (``Block.to_dict()``)."""


@dataclass(slots=True, frozen=True)
class SlackMessage:
    """One message to post: validated blocks and the plain-text fallback for notifications/screen readers.

    Both are kept as UTF-8 (Slack's limits bound a message's blocks): a ``str`` with one "—" or emoji in it
    takes two or four bytes a character, and an answer about a fleet is many messages.
    """

    blocks_json: bytes  # the blocks as one JSON array
    text_utf8: bytes

    @property
    def blocks(self) -> list[BlockDict]:
        """The blocks as the JSON Slack receives (parsed anew on each use)."""
        blocks: list[BlockDict] = json.loads(self.blocks_json)
        return blocks

    @property
    def text(self) -> str:
        """The plain-text fallback."""
        return self.text_utf8.decode()

    def block_dicts(self) -> list[BlockDict]:
        """The blocks as the JSON Slack receives."""
        return self.blocks


@dataclass(slots=True)
class _Piece:
    json: bytes  # the block as JSON (UTF-8)
    size: int  # its length in characters: what the block adds to a message
    text: str  # plain-text fallback of this block


def _escape_literal(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape(text: str) -> str:
    """``text`` for Slack (mrkdwn or a message's ``text``): ``&``, ``<`` and ``>`` escaped, so nothing in it is
    live, except the mentions the bot built itself (``services.mentions``), which become ``<@U…>``."""
    if not mentions.present(text):
        return _escape_literal(text)
    parts = mentions.split(text)
    return "".join(p.markup if isinstance(p, mentions.Mention) else _escape_literal(p) for p in parts)


def plain_text(text: str) -> str:
    """``text`` for a plain_text object (headers, buttons): Slack parses no markup there, so the bot's own
    mentions are shown as their text."""
    return mentions.plain(text)


def md(text: str) -> MarkdownTextObject:
    """A mrkdwn text object for already escaped ``text``; ``verbatim``: Slack links no raw URL, channel name
    or ``@here`` in it (only the markup the bot wrote, and it escapes everything else)."""
    return MarkdownTextObject(text=text, verbatim=True)


def cut(text: str, limit: int) -> str:
    """Escaped ``text`` shortened to ``limit`` characters with "…", never inside an entity or a mention."""
    if len(text) <= limit:
        return text
    at = _safe_cut(text, limit - 1)
    return text[:at] + "…"


def _safe_cut(line: str, at: int) -> int:
    """The last cut at or before ``at`` that splits no ``&amp;`` entity and no ``<@U…>`` mention."""
    amp = line.rfind("&", max(0, at - 5), at)
    if amp > 0 and ";" not in line[amp:at]:
        at = amp
    lt = line.rfind("<", max(0, at - 40), at)
    if lt > 0 and ">" not in line[lt:at]:
        at = lt
    return at


def _code_safe(line: str) -> str:
    # A ``` inside a code block would end it early; break it with zero-width spaces (content unchanged to a reader).
    return escape(line).replace("```", "`\u200b`\u200b`")


def _block_json(block: Block) -> str:
    # to_dict() validates (raises SlackObjectFormationError on a broken block).
    return json.dumps(block.to_dict(), ensure_ascii=False)


def _piece(block: Block, text: str) -> _Piece:
    data = _block_json(block)
    return _Piece(json=data.encode(), size=len(data), text=text)


def _hard_wrap(line: str, width: int) -> list[str]:
    """A line longer than ``width`` as consecutive pieces (wrapping, not cutting); never splits ``&amp;`` or a
    mention."""
    out: list[str] = []
    while len(line) > width:
        at = _safe_cut(line, width)
        if at <= 0:
            at = width
        out.append(line[:at])
        line = line[at:]
    out.append(line)
    return out


def _pack(pairs: Iterable[tuple[str, str]], budget: int) -> list[tuple[list[str], list[str]]]:
    """Group (mrkdwn line, plain line) pairs so each group's mrkdwn, joined by newlines, fits ``budget``.

    A plain line goes with the group where its (possibly wrapped) mrkdwn line starts, so the fallback text of
    every part holds exactly that part's content.
    """
    groups: list[tuple[list[str], list[str]]] = []
    cur: list[str] = []
    cur_plain: list[str] = []
    size = 0
    for mrkdwn, plain in pairs:
        for k, piece in enumerate(_hard_wrap(mrkdwn, budget)):
            add = len(piece) + (1 if cur else 0)
            if cur and size + add > budget:
                groups.append((cur, cur_plain))
                cur, cur_plain, size = [], [], 0
                add = len(piece)
            cur.append(piece)
            if k == 0:
                cur_plain.append(plain)
            size += add
    if cur or not groups:
        groups.append((cur, cur_plain))
    return groups


def _header(title: str, status: str | None) -> list[_Piece]:
    emoji = EMOJI.get(status or "info", "")  # type: ignore[call-overload]
    text = f"{emoji} {plain_text(title)}".strip()
    if len(text) <= MAX_HEADER:
        return [_piece(HeaderBlock(text=PlainTextObject(text=text, emoji=True)), text)]
    # Too long for a header block: a bold section keeps every character.
    return _text_blocks(_lines("*", "", text.replace("\n", " ") + "*"))


def _text_blocks(lines: list[tuple[str, str]], budget: int = MAX_SECTION_TEXT) -> list[_Piece]:
    """Section blocks for (escaped mrkdwn, plain) line pairs, split at line boundaries below 3000 characters."""
    out: list[_Piece] = []
    for mrkdwn, plain in _pack(lines, budget):
        body = "\n".join(mrkdwn) or " "
        out.append(_piece(SectionBlock(text=md(body)), "\n".join(plain)))
    return out


def _fit(p: _Piece) -> list[_Piece]:
    """``p``, or, when it weighs more than a message can carry, its fallback text as smaller sections."""
    if p.size <= _PIECE_BUDGET:
        return [p]
    return _sections_within(_lines("", "", p.text or " "), MAX_SECTION_TEXT)


def _sections_within(lines: list[tuple[str, str]], budget: int) -> list[_Piece]:
    # Characters that JSON escapes (quotes, backslashes, control characters) weigh up to six times their
    # count: halve the section's text until every block fits.
    out: list[_Piece] = []
    for q in _text_blocks(lines, budget):
        if q.size <= _PIECE_BUDGET or budget <= 64:
            out.append(q)
        else:
            out += _sections_within(_lines("", "", q.text or " "), budget // 2)
    return out


def _lines(mrkdwn_prefix: str, plain_prefix: str, text: str) -> list[tuple[str, str]]:
    """Pairs of (escaped, plain) lines of ``text``, the first line led by the given prefixes."""
    raw = text.split("\n")
    pairs = [(escape(line), line) for line in raw]
    pairs[0] = (mrkdwn_prefix + pairs[0][0], plain_prefix + pairs[0][1])
    return pairs


def _code_blocks(title: str | None, head: list[str], body: list[str]) -> list[_Piece]:
    """A code-block "table" split across sections at line boundaries; each part is a complete code block
    that repeats the column headings, and the parts after the first say they continue."""
    first = f"*{escape(title)}*\n" if title else ""
    cont = f"*{escape(title)}* (continued)\n" if title else "(continued)\n"
    head_esc = [_code_safe(h) for h in head]
    fixed = max(len(first), len(cont)) + len("```\n\n```") + sum(len(h) + 1 for h in head_esc)
    out: list[_Piece] = []
    for k, (g, plain) in enumerate(_pack([(_code_safe(b), b) for b in body], MAX_SECTION_TEXT - fixed)):
        text = (first if k == 0 else cont) + "```\n" + "\n".join(head_esc + g) + "\n```"
        fallback_head = (title + ("" if k == 0 else " (continued)") + ":\n") if title else ""
        out.append(_piece(SectionBlock(text=md(text)), fallback_head + "\n".join(head + plain)))
    return out


def _tabulate(s: Section) -> str:
    return tabulate(s.rows, headers=s.headers, tablefmt="simple", disable_numparse=True) if s.rows or s.headers \
        else ""


def _table(s: Section, rendered: str) -> list[_Piece]:
    lines = rendered.splitlines()
    n_head = 2 if s.headers and s.rows else (1 if s.headers else 0)
    head, body = lines[:n_head], lines[n_head:]
    if not body and not head:
        body = ["(empty)"]
    return _code_blocks(s.title, head, body)


def _code(s: Section) -> list[_Piece]:
    lines = (s.text or "").splitlines() or [""]
    return _code_blocks(s.title, [], lines)


def _json_size(obj: object) -> int:
    return len(json.dumps(obj, ensure_ascii=False))


_BLOCK_OVERHEAD = 64  # a block's own keys around its elements or fields
_MD_OVERHEAD = _json_size(md("x").to_dict()) - _json_size("x")  # a mrkdwn object around its text's JSON


def _md_size(text: str) -> int:
    """What ``md(text)`` weighs in a block's JSON (without building and validating it twice)."""
    return _MD_OVERHEAD + _json_size(text)


def _fields(s: Section) -> list[_Piece]:
    out: list[_Piece] = []
    batch: list[tuple[str, str]] = []
    weight = 0

    def flush() -> None:
        nonlocal weight
        if batch:
            objs = [md(f"*{escape(k)}*\n{escape(v) or ' '}") for k, v in batch]
            plain = "\n".join(f"{k}: {v}" for k, v in batch)
            out.append(_piece(SectionBlock(fields=objs), plain))
            batch.clear()
            weight = 0

    for k, v in s.fields:
        text = f"*{escape(k)}*\n{escape(v)}"
        if len(text) > MAX_FIELD:
            # Too long for a field: it gets its own section(s), split, so nothing is cut.
            flush()
            out += _text_blocks([(f"*{escape(k)}*", f"{k}:"), *_lines("", "", v)])
            continue
        size = _md_size(text) + 1
        if batch and weight + size + _BLOCK_OVERHEAD > _PIECE_BUDGET:
            flush()  # ten long fields weigh more than one message may
        batch.append((k, v))
        weight += size
        if len(batch) == MAX_FIELDS:
            flush()
    flush()
    return out


def _context(s: Section) -> list[_Piece]:
    lines = _lines(f"*{escape(s.title)}:* " if s.title else "", f"{s.title}: " if s.title else "", s.text or "")
    out: list[_Piece] = []
    chunk: list[tuple[MarkdownTextObject, list[str]]] = []
    weight = 0

    def flush() -> None:
        nonlocal weight
        if chunk:
            out.append(_piece(ContextBlock(elements=[e for e, _ in chunk]),
                              "\n".join("\n".join(p) for _, p in chunk)))
            chunk.clear()
            weight = 0

    for g, plain in _pack(lines, MAX_CONTEXT_ELEMENT):
        body = "\n".join(g) or " "
        element = md(body)
        size = _md_size(body) + 1
        # At most ten elements, and no more than one message can carry: a 12 KB warning is several blocks.
        if chunk and (len(chunk) == MAX_CONTEXT_ELEMENTS or weight + size + _BLOCK_OVERHEAD > _PIECE_BUDGET):
            flush()
        chunk.append((element, plain))
        weight += size
    flush()
    return out


# Tables already drawn in this answer, by what they show: an answer about a fleet that runs one deployment has
# the same flag and environment tables on every card, and drawing a table is most of the render's work.
DrawnTables = dict[tuple[object, ...], list[tuple[bytes, int, str]]]


def _section(s: Section, drawn_tables: DrawnTables | None = None) -> list[_Piece]:
    key: tuple[object, ...] | None = None
    if s.kind == "table" and drawn_tables is not None:
        key = (s.title, tuple(s.headers), tuple(map(tuple, s.rows)))
        if (done := drawn_tables.get(key)) is not None:
            return [_Piece(json=j, size=n, text=t) for j, n, t in done]
    # A table is drawn by tabulate once, for its blocks and its fallback alike: drawing is a table's costly part.
    drawn = _tabulate(s) if s.kind == "table" else None
    pieces = _table(s, drawn) if drawn is not None else _section_pieces(s)
    if len(pieces) == 1:
        # Not split: the fallback is exactly what the terminal shows for this section.
        pieces[0].text = (render_table(s, drawn) if drawn is not None else render_section(s)).strip("\n")
    if key is not None and drawn_tables is not None:
        drawn_tables[key] = [(p.json, p.size, p.text) for p in pieces]
    return pieces


def _section_pieces(s: Section) -> list[_Piece]:
    """The blocks of any section but a table (:func:`_section` draws those)."""
    if s.kind == "header":
        return _header(s.title or s.text or "", s.status)
    if s.kind == "divider":
        return [_piece(DividerBlock(), "")]
    if s.kind == "fields":
        return _fields(s) if s.fields else []
    if s.kind == "code":
        return _code(s)
    if s.kind == "context":
        return _context(s) if (s.text or s.title) else []
    text = s.text or ""
    if not (text.strip() or s.title):
        return []
    if s.title:
        return _text_blocks(_lines(f"*{escape(s.title)}:* ", f"{s.title}: ", text))
    return _text_blocks(_lines("", "", text))


def _button_text(text: str) -> str:
    text = plain_text(text)
    return text if len(text) <= MAX_BUTTON_TEXT else text[: MAX_BUTTON_TEXT - 1] + "…"


def _actions(actions: list[Action]) -> list[_Piece]:
    out: list[_Piece] = []
    chunk: list[tuple[ButtonElement, str]] = []
    weight = 0

    def flush() -> None:
        nonlocal weight
        if chunk:
            out.append(_piece(ActionsBlock(elements=[b for b, _ in chunk]), "  ".join(f"[{t}]" for _, t in chunk)))
            chunk.clear()
            weight = 0

    for a in actions:
        # A value is the bot's own id; one longer than Slack takes is cut rather than failing the answer.
        button = ButtonElement(text=PlainTextObject(text=_button_text(a.text), emoji=True), action_id=a.action_id,
                               value=a.value[:MAX_BUTTON_VALUE], style=a.style)
        size = _json_size(button.to_dict()) + 1
        if chunk and (len(chunk) == MAX_ACTIONS or weight + size + _BLOCK_OVERHEAD > _PIECE_BUDGET):
            flush()
        chunk.append((button, plain_text(a.text)))
        weight += size
    flush()
    return out


def attachment_sections(att: Attachment) -> list[Section]:
    """An attachment as a code section (when it cannot be uploaded as a file)."""
    return [Section(kind="code", title=att.title or att.filename, text=att.content)]


def _pieces(reply: Reply, attachments: bool, consume: bool) -> Iterator[_Piece]:
    yield from _header(reply.title, reply.status)
    tables: DrawnTables = {}
    if consume:
        # Each section let go once drawn: the answer's sections and its blocks are never all held at once.
        pending = reply.sections
        pending.reverse()
        while pending:
            yield from _section(pending.pop(), tables)
    else:
        for s in reply.sections:
            yield from _section(s, tables)
    if reply.actions:
        yield from _actions(reply.actions)
    if attachments:
        for att in reply.attachments:
            for s in attachment_sections(att):
                yield from _section(s)


def check_message(msg: SlackMessage) -> None:
    """Our guard for the limits slack_sdk does not check; raises ``BlockLimitError``."""
    dicts = msg.block_dicts()
    if not dicts:
        raise BlockLimitError("a message without blocks")
    if len(dicts) > MAX_BLOCKS:
        raise BlockLimitError(f"{len(dicts)} blocks in one message (max {MAX_BLOCKS})")
    size = len(json.dumps(dicts, ensure_ascii=False))
    if size > MAX_MESSAGE_CHARS:
        raise BlockLimitError(f"message blocks are {size} characters (max {MAX_MESSAGE_CHARS})")
    for d in dicts:
        if d["type"] == "section":
            if len(d.get("text", {}).get("text", "")) > MAX_SECTION_TEXT:
                raise BlockLimitError("section text over 3000 characters")
            fields = d.get("fields", [])
            if len(fields) > MAX_FIELDS or any(len(f["text"]) > MAX_FIELD for f in fields):
                raise BlockLimitError("section fields over the limit")
        elif d["type"] == "header" and len(d["text"]["text"]) > MAX_HEADER:
            raise BlockLimitError("header over 150 characters")
        elif d["type"] == "context":
            els = d["elements"]
            if len(els) > MAX_CONTEXT_ELEMENTS or any(len(e.get("text", "")) > MAX_CONTEXT_ELEMENT for e in els):
                raise BlockLimitError("context block over the limit")


def render_messages(reply: Reply, attachments: bool = True, consume: bool = False) -> list[SlackMessage]:
    """The reply as one or more Slack messages, each within Slack's limits, in order, nothing left out.

    ``attachments=False`` leaves the reply's attachments out (the caller uploads them as files).
    ``consume=True`` empties ``reply.sections`` as they are drawn, for a caller that posts the answer and
    drops it. The Slack front end no longer asks for it: it did not lower the serving bot's peak memory
    (``python -m bench.warm_client``; the README's "Benchmark").
    """
    # Each message's blocks (comma-joined JSON) and fallback text, made as soon as its blocks are known so
    # that no piece outlives its message; the "continued" marker is put in front once the count is known.
    bodies: list[tuple[bytes, str]] = []
    cur: list[_Piece] = []
    size = 2  # the surrounding [ ]

    def close() -> None:
        bodies.append((b",".join(p.json for p in cur), "\n".join(p.text for p in cur if p.text)))

    for whole in _pieces(reply, attachments, consume):
        for p in _fit(whole):
            # Every message keeps room for one "continued" context block.
            if cur and (len(cur) + 1 >= MAX_BLOCKS or size + p.size + 1 > MAX_MESSAGE_CHARS - _MARKER_CHARS):
                close()
                cur, size = [], 2
            cur.append(p)
            size += p.size + 1
    if cur:
        close()
    cur = []
    n = len(bodies)
    messages: list[SlackMessage] = []
    bodies.reverse()  # popped in order: each body let go once its message is made
    for i in range(n):
        blocks, text = bodies.pop()
        if i > 0:
            title = reply.title if len(reply.title) <= _TITLE_IN_MARKER else reply.title[:_TITLE_IN_MARKER] + "…"
            marker = f"{title} — continued (part {i + 1} of {n})"
            blocks = _block_json(ContextBlock(elements=[md(cut(escape(marker), MAX_CONTEXT_ELEMENT))])).encode() \
                + b"," + blocks
            text = f"{marker}\n{text}" if text else marker
        # The fallback text is what notifications show, and what is posted when Slack refuses the blocks:
        # escaped like the blocks.
        msg = SlackMessage(blocks_json=b"[" + blocks + b"]", text_utf8=escape(text or reply.title).encode())
        check_message(msg)
        messages.append(msg)
    return messages


def render_blocks(reply: Reply) -> list[list[BlockDict]]:
    """The reply as Block Kit blocks, one list per message (see ``render_messages`` for the fallback text)."""
    return [m.blocks for m in render_messages(reply)]


def failure_message(title: str, what: str) -> SlackMessage:
    """One short message saying that ``title`` could not be laid out for Slack and why (``what``).

    Posted in place of an answer or notice whose rendering failed; it cannot fail itself (a bounded text).
    """
    body = cut(escape(f":warning: {title} — {what}"), MAX_SECTION_TEXT)
    blocks = _block_json(SectionBlock(text=md(body)))
    return SlackMessage(blocks_json=f"[{blocks}]".encode(), text_utf8=body.encode())


def render_failure(error: BaseException) -> str:
    """What went wrong in rendering, in a few words a person can pass on (the cause is in the log)."""
    if isinstance(error, BlockLimitError | SlackObjectFormationError):
        detail = str(error).splitlines()[0][:200] if str(error) else ""
        return f"{type(error).__name__}: {detail}" if detail else type(error).__name__
    return type(error).__name__
