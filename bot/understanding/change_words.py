"""A settings change in a message (issue 25): ``set max-num-seqs 256 on kimi``, ``unset env NCCL_ALGO on kimi``,
``change kimi: --max-model-len 65536 --max-num-seqs 128``, ``revert kimi``.

A change is recognised by its shape, not scored: its verb opens the message (after "please", "can you" or the
bot's name), and it is an order only when ``orders.decide`` says so (no question, doubt, condition, negation,
quote or code). A change asked as a question is answered with what the setting is now, and asked back. The
words after the verb, the service left out, become the typed ``Args.change_text``: the service layer reads them
into a ``ChangeSpec`` (shell-style quotes, ``shlex``); nothing of it ever reaches a shell.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from bot.understanding import orders
from bot.understanding.markup import Message
from bot.understanding.names import Target
from bot.understanding.settings_words import Setting
from bot.understanding.text import Token, Words
from config.models import Service
from handlers.context import Args

COMMAND = {"set": "change", "unset": "change", "change": "change", "revert": "revert"}
_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2018": "'", "\u2019": "'", "\u00b4": "'"})
_PREPOSITION = re.compile(r"\s+(?:on|for|of|at|in)\s+", re.I)
_WORD = r"[^\s'\"]+"
_TAIL = re.compile(rf"\s+(?:on|for|of|at|in)\s+({_WORD}?)(?:\s+(?:on|at)\s+({_WORD}?))?[\s.!?]*$", re.I)
_HEAD = re.compile(rf"^\s*({_WORD}?)(?:\s+(?:on|at)\s+({_WORD}?))?\s*(?::|\s|$)", re.I)
_LAST_ON = re.compile(r"\s+on\s+([A-Za-z][\w.-]*?)[\s.!?]*$", re.I)
_TO = re.compile(r"(?<=\s)to(?=\s)", re.I)
_MENTION = re.compile(r"<[@#!][^<>]*>")
_LINK = re.compile(r"<((?:https?|mailto|ftp):[^<>|]*)(?:\|([^<>]*))?>")
ChangeVerb = Literal["set", "unset", "change"]


@dataclass
class ChangeOrder:
    """What the message asks: the command, whether it is an order, and the change's words."""

    command: str
    decision: orders.Decision
    verb: Token
    text: str | None = None  # the words after the verb, the targets left out (None: a revert)
    targets: list[Target] = field(default_factory=list)
    target_words: set[str] = field(default_factory=set)
    unknown: list[str] = field(default_factory=list)  # "on nosuch": where the service stands, a name nothing knows

    def unknown_of(self, found: Sequence[str]) -> list[str]:
        """The message's unknown names that are this change's target (its values are no names)."""
        return list(dict.fromkeys([*(u for u in found if u in self.target_words), *self.unknown]))

    @property
    def change_verb(self) -> ChangeVerb | None:
        """``set``, ``unset`` or ``change`` (None for a revert)."""
        norm = self.verb.norm
        return norm if norm in ("set", "unset", "change") else None  # type: ignore[return-value]


def _as_typed(message: Message) -> str:
    """The message as the person typed it: values keep every character (``*``, ``_``, ``:x:``); Slack's escapes,
    links and mentions undone; outside quoted values, code marks dropped and typographic quotes straightened."""
    text = message.raw or message.plain
    if message.surface == "slack":
        text = _LINK.sub(lambda m: m.group(2) or m.group(1), _MENTION.sub(" ", text))
        text = html.unescape(text)
    # Code marks around the change go; a backtick inside a quoted value is the value's.
    return _outside_quotes(text, lambda part: part.replace("`", "").translate(_QUOTES))


def lead_verb(w: Words, names: set[int]) -> Token | None:
    """The change verb opening the message ("please set …", "can you revert kimi"), if one does."""
    toks = w.tokens
    for i, t in enumerate(toks):
        if t.norm in orders.LEAD or t.norm in orders.POLITE or t.norm in orders.YOU or t.index in names:
            continue
        if t.norm not in COMMAND or (i + 1 < len(toks) and toks[i + 1].norm == "up"):
            return None  # "set up", or no change verb first
        return t
    return None


def _outside_quotes(text: str, fix: Callable[[str], str]) -> str:
    """``fix`` applied to the parts of ``text`` that are not inside quotes (quoted values stay as written)."""
    out: list[str] = []
    start, quote = 0, ""
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                out.append(text[start:i + 1])
                start, quote = i + 1, ""
        elif ch in "'\"":
            out.append(fix(text[start:i]))
            start, quote = i, ch
    out.append(text[start:] if quote else fix(text[start:]))
    return "".join(out)


def _strip_targets(text: str, resolve: Callable[[str], Target | None], head: bool) -> tuple[str, list[Target],
                                                                                          set[str]]:
    """The change's words without the service (``on kimi [on gpu-a]`` at the end; ``kimi:`` first)."""
    found: list[Target] = []
    words: set[str] = set()
    # The leftmost "on NAME [on NODE]" that ends the text and names targets only ("to 256 on kimi" is not one).
    tails = (_TAIL.match(text, p.start()) for p in _PREPOSITION.finditer(text))
    m = next((t for t in tails if t is not None and all(resolve(g) for g in t.groups() if g)), None)
    if m:
        found += [t for g in m.groups() if g and (t := resolve(g)) is not None]
        words.update(g.lower() for g in m.groups() if g)
        text = text[:m.start()]
    elif not head and (last := _LAST_ON.search(text)) is not None:
        words.add(last.group(1).lower())  # names nothing: the answer says so
        text = text[:last.start()]
    m = _HEAD.match(text) if head or not found else None
    if m and resolve(m.group(1)) and (head or m.group(0).rstrip().endswith(":")):
        found += [t for g in m.groups() if g and (t := resolve(g)) is not None]
        words.update(g.lower() for g in m.groups() if g)
        text = text[m.end():]
    return text.strip(), found, words


def read(message: Message, w: Words, names: set[int], resolve: Callable[[str], Target | None]) -> ChangeOrder | None:
    """The change the message asks for (and whether it is an order), or None when it opens with no change verb."""
    verb = lead_verb(w, names)
    if verb is None:
        return None
    decision = orders.decide(w, verb, names, to_other=message.to_other)
    plain = _as_typed(message)
    m = re.search(rf"(?<![\w-]){re.escape(verb.raw)}(?![\w-])", plain, re.I)
    rest = plain[m.end():] if m else ""
    command = COMMAND[verb.norm]
    text, targets, words = _strip_targets(rest, resolve, head=verb.norm in ("change", "revert"))
    unknown = sorted(w for w in words if resolve(w) is None)
    if command == "revert":
        return ChangeOrder(command, decision, verb, None, targets, words, unknown)
    # "set max-num-seqs to 256": the everyday "to" is no value (a value "to" is written in quotes).
    text = _outside_quotes(f" {text} ", lambda part: _TO.sub(" ", part)).strip()
    return ChangeOrder(command, decision, verb, text, targets, words, unknown)


@dataclass
class Understood:
    """What the reading says for a change: the command, its typed arguments, and a question back when asked."""

    command: str
    args: Args
    asked: bool = False
    note: str | None = None
    offers: list[str] = field(default_factory=list)


def understood(change: ChangeOrder, setting: Setting | None, services: Sequence[Service], explicit: bool,
               unknown: Sequence[str]) -> Understood:
    """An order (aimed at a service, or at a name nothing knows: the answer says so) runs the change; asked as a
    question, in doubt or for later, the answer is what the setting is now, and the question back."""
    if change.decision == "order" and (explicit or unknown):
        named = setting.name if setting is not None and setting.kind == "flag" else None  # for a did-you-mean
        return Understood(change.command, Args(change_verb=change.change_verb, change_text=change.text, flag=named))
    args = Args()
    if setting is not None:
        args = Args(env=setting.name) if setting.kind == "env" else Args(flag=setting.name, focus="flag")
    who = " ".join(dict.fromkeys(s.name for s in services)) if explicit else "SERVICE"
    said = (f"revert {who}" if change.command == "revert" else f"change {who}: {change.text}"
            if change.verb.norm == "change" else f"{change.verb.norm} {change.text}")
    if change.verb.norm in ("set", "unset") and (change.targets or not explicit):
        said += f" on {who}"  # (else the text still names it, with what made it a question: "tomorrow")
    return Understood("flag" if setting is not None else "changes", args, True,
                      f"Did you want me to {change.verb.norm} that? Say it as an order: `{said}`.",
                      [said] if explicit and change.targets else [])
