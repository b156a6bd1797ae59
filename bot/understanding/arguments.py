"""Each command's typed arguments, read from the message's words: only those the command declares
(``Command.args``), into one validated ``Args``."""

from __future__ import annotations

import re
from collections.abc import Sequence

from bot.understanding.markup import Message
from bot.understanding.settings_words import Setting
from bot.understanding.text import Token, Words
from handlers.commands import Command
from handlers.context import Args, Focus
from handlers.silence_text import clean_reason, split_silence

_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_NUMBER_UNIT = re.compile(r"^(\d{1,4})(s|secs?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|weeks?)$")
_UNIT_WORD = re.compile(r"^(s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?|w|weeks?)$")
_ONE = {"a", "an", "one", "the", "last", "past", "this"}
_UNITS = {"s": 1, "sec": 1, "secs": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "mins": 60, "minute": 60,
          "minutes": 60, "h": 3600, "hr": 3600, "hrs": 3600, "hour": 3600, "hours": 3600, "d": 86400,
          "day": 86400, "days": 86400, "w": 604800, "week": 604800, "weeks": 604800}


def _unit(word: str) -> int | None:
    return _UNITS.get(word)


def window(tokens: Sequence[Token]) -> int | None:
    """"last 6h", "24 h", "7d", "past day", "over the last week": a time window in seconds."""
    for i, t in enumerate(tokens):
        m = _NUMBER_UNIT.match(t.norm)
        if m:
            return int(m.group(1)) * _UNIT_S[m.group(2)[0]]
        nxt = tokens[i + 1].norm if i + 1 < len(tokens) else ""
        if t.norm.isdigit() and len(t.norm) <= 4 and _unit(nxt):
            return int(t.norm) * (_unit(nxt) or 0)
        if t.norm in _ONE and _unit(nxt) and nxt not in ("m", "s", "d", "h", "w"):
            return _unit(nxt)
    return None


def lines(tokens: Sequence[Token], skip: set[int]) -> int | None:
    """The number of log lines: a bare number that names nothing else ("logs kimi 100", "last 50 lines")."""
    found: int | None = None
    for i, t in enumerate(tokens):
        if t.index in skip or not t.norm.isdigit() or len(t.norm) > 6:
            continue
        nxt = tokens[i + 1].norm if i + 1 < len(tokens) else ""
        if _unit(nxt):
            continue  # "10 min" is a time, not lines
        found = int(t.norm)
    return found


def focus(words: Words, skip: set[int]) -> Focus | None:
    """Which part of the settings a settings question is about (None: all of it)."""
    norms = [t.norm for t in words.tokens if t.index not in skip]
    has = set(norms)
    broad = has & {"everything", "all", "full", "whole", "settings", "setting", "config", "configuration", "cfg"}
    if "nccl" in has and not broad:
        return "nccl"
    if has & {"env", "environment", "vars", "variables", "environmentfile"} and not broad - {"all"}:
        return "env"
    if "model" in has and has & {"which", "what"} and not (has & {"flags", "args", "settings", "config"}):
        return "model"
    if has & {"flags", "args", "arguments", "argv"} and not (has & {"env", "environment", "everything"}):
        return "flags"
    return None


def parse(command: Command, words: Words, message: Message, setting: Setting | None, negated: bool,
          skip: set[int]) -> Args:
    """The typed arguments ``command`` reads from ``words`` (``skip``: tokens that are names or flags)."""
    values: dict[str, object] = {}
    toks = words.live or words.tokens
    if "lines" in command.args:
        values["lines"] = lines(toks, skip)
    if "window_s" in command.args:
        values["window_s"] = window(toks)
    if "force" in command.args:
        values["force"] = any(t.norm in ("force", "--force", "forced") for t in toks)
    if "focus" in command.args:
        values["focus"] = focus(words, skip)
    if setting is not None and ("flag" in command.args or "env" in command.args):
        if setting.kind == "env":
            values["env"], values["value"] = setting.name, setting.value
        else:
            values["flag"], values["focus"] = setting.name, "flag"
            values["value"] = setting.value
    if "duration_s" in command.args:
        plain = " ".join(message.plain.split())
        _, seconds, reason = split_silence(plain)
        if seconds is None:
            seconds = window(toks)
        values["duration_s"] = seconds
        values["reason"] = clean_reason(reason)
    if "negated" in command.args:
        values["negated"] = negated
    return Args.model_validate({k: v for k, v in values.items() if v is not None})
