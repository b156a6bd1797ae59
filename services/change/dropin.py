"""inferbot's one drop-in per unit: its text, quoted so that the process receives every value byte for byte.

systemd's rules differ per directive (systemd.syntax(7), systemd.service(5), systemd.exec(5)), so the quoting is
written here by hand, and checked against a real systemd 252 (tests/systemd/test_change_systemd.py):

* ``ExecStart=`` words: quotes group, C escapes are decoded in and out of quotes, ``%`` starts a specifier, ``$VAR``
  and ``${VAR}`` expand — so ``\\`` → ``\\\\``, ``"`` → ``\\"``, ``%`` → ``%%``, ``$`` → ``$$``, controls as ``\\xNN``,
  and the word in double quotes unless it is plain;
* ``Environment=`` items: quotes and C escapes as above, ``%`` specifiers too, but **no** ``$`` expansion — a
  ``$`` is written as it is (``$$`` would reach the process as two);
* ``UnsetEnvironment=`` names: validated names only.

The header says who wrote the file, which change, and how to remove it by hand; its ``inferbot-delta`` line holds
the whole change against the operator's unit as JSON, so a second change merges into the first.
"""

from __future__ import annotations

import json
import re

from pydantic import ValidationError

from services.change.spec import ENV_NAME, ChangeSpec

HEADER = "# Written by inferbot: the settings changes asked for in chat. inferbot rewrites or removes this file;"
DELTA_MARK = "# inferbot-delta: "
_PLAIN = re.compile(r"[A-Za-z0-9_@+=:,./-]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
CHANGE_ID = re.compile(r"^[A-Za-z0-9#._:-]{1,40}\Z")


def _controls(text: str) -> str:
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group(0)):02x}", text)


def exec_word(value: str) -> str:
    """One argv word for an ``ExecStart=`` line: the process gets exactly ``value``."""
    if value and _PLAIN.fullmatch(value):
        return value
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return '"' + _controls(escaped) + '"'


def environment_item(name: str, value: str) -> str:
    """One ``Environment=`` item: the process gets ``name=value`` exactly (``$`` is literal there)."""
    if not ENV_NAME.match(name):
        raise ValueError(f"not an environment variable name: {name!r}")
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'"{name}={_controls(escaped)}"'


def render(unit: str, path: str, delta: ChangeSpec, exec_start: str | None, change_id: str) -> str:
    """The drop-in's text: header, ``[Service]``, ``Environment=``/``UnsetEnvironment=``, and — when flags change —
    ``ExecStart=`` (empty, which resets the operator's) then the new ``ExecStart=`` (already quoted)."""
    if not CHANGE_ID.match(change_id):
        raise ValueError(f"not a change id: {change_id!r}")
    delta_json = json.dumps(delta.model_dump(), ensure_ascii=True, separators=(",", ":"))
    lines = [
        HEADER,
        f"# it holds change {change_id} and every earlier one still in force, against the unit's own files.",
        "# To go back to the unit's own settings by hand:",
        f"#   sudo rm {path} && sudo systemctl daemon-reload && sudo systemctl restart {unit}",
        DELTA_MARK + delta_json,
        "[Service]",
    ]
    lines += [f"Environment={environment_item(k, v)}" for k, v in delta.set_env.items()]
    for name in delta.unset_env:
        if not ENV_NAME.match(name):
            raise ValueError(f"not an environment variable name: {name!r}")
        lines.append(f"UnsetEnvironment={name}")
    if exec_start is not None:
        if "\n" in exec_start or "\r" in exec_start:
            raise ValueError("an ExecStart= line cannot hold a line break")
        lines += ["ExecStart=", f"ExecStart={exec_start}"]
    return "\n".join(lines) + "\n"


def read_delta(text: str) -> ChangeSpec | None:
    """The change an inferbot drop-in holds (its ``inferbot-delta`` line), or None when ``text`` is not one."""
    lines = text.splitlines()
    if not lines or lines[0] != HEADER:
        return None
    for line in lines:
        if line.startswith(DELTA_MARK):
            try:
                return ChangeSpec.model_validate_json(line[len(DELTA_MARK):])
            except ValidationError:
                return None
    return None
