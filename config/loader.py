"""Find, read and validate the TOML configuration."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from pydantic import ValidationError

from config.local_file import CONFIG_MAX_BYTES, FileTooLarge, NotRegularFile, read_local_text
from config.models import BotConfig


class ConfigError(Exception):
    """The configuration is missing or malformed; the message names the file, the key and the fix.

    ``example``: config text to add, shown below the one-line message (and as ``example`` in ``--json``).
    """

    def __init__(self, message: str, example: str | None = None) -> None:
        super().__init__(message)
        self.example = example


FIRST_NODE_EXAMPLE = """\
[[nodes]]
name = "gpu-a"
host = "10.0.0.5"
user = "inferbot"
key_file = "~/.ssh/inferbot_ed25519"

[[services]]
name = "kimi"
node = "gpu-a"
unit = "vllm-kimi.service"
"""
"""What a config that names no node is told to add (valid as it stands; every key: ``config/example.toml``)."""
_ADD_A_NODE = ("add a [[nodes]] block and its [[services]] like the example that follows "
               "(config/example.toml has them all)")


def find_config(explicit: str | None) -> Path:
    """``--config FILE``, else ``$INFERBOT_CONFIG``, else ``./inferbot.toml``."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("INFERBOT_CONFIG")
    if env:
        return Path(env)
    return Path("inferbot.toml")


def _loc(loc: tuple[int | str, ...], data: dict[str, object]) -> str:
    parts: list[str] = []
    cur: object = data
    for i, p in enumerate(loc):
        if isinstance(p, int):
            name = None
            if isinstance(cur, list) and p < len(cur) and isinstance(cur[p], dict):
                name = cur[p].get("name")
            table = parts[-1] if parts else "?"
            parts[-1] = f"[[{table}]] #{p + 1}" + (f" ({name!r})" if name else "")
            cur = cur[p] if isinstance(cur, list) and p < len(cur) else None
        else:
            parts.append(str(p))
            cur = cur.get(p) if isinstance(cur, dict) else None
        del i
    return " → ".join(parts) if parts else "(top level)"


def parse_config(text: str, source: str = "<config>") -> BotConfig:
    """Validate TOML text into a ``BotConfig``; raise ``ConfigError`` with a readable message."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{source}: not valid TOML: {e}") from None
    if not data:
        # An empty file would validate to a bot that knows no node and answers every question with nothing.
        raise ConfigError(f"{source}: the config is empty — {_ADD_A_NODE}", FIRST_NODE_EXAMPLE)
    try:
        cfg = BotConfig.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        where = _loc(tuple(first["loc"]), data)
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling; see the config reference in the README)"
        elif first["type"] == "missing":
            msg = "this key is required"
        more = f" (and {len(e.errors()) - 1} more problem(s))" if len(e.errors()) > 1 else ""
        raise ConfigError(f"{source}: {where}: {msg}{more}") from None
    return cfg.model_copy(update={"source": source})


def load_config(explicit: str | None = None) -> BotConfig:
    """Load the configuration from where ``find_config`` points (a regular file of at most 4 MiB)."""
    path = find_config(explicit)
    try:
        text = read_local_text(path, CONFIG_MAX_BYTES)
    except UnicodeDecodeError as e:
        raise ConfigError(f"{path}: not UTF-8 text (byte {e.start}: {e.object[e.start:e.start + 1]!r}) — "
                          f"save the config as UTF-8") from None
    except NotRegularFile as e:
        if e.kind == "a directory":
            raise ConfigError(f"{path}: is a directory, not a config file — pass --config FILE") from None
        raise ConfigError(f"{path}: {e} — the config must be a file (write it to one and pass --config FILE)") from None
    except FileTooLarge as e:
        raise ConfigError(f"{path}: {e} — is this the config? (pass --config FILE)") from None
    except FileNotFoundError:
        raise ConfigError(
            f"{path}: config file not found — pass --config FILE, set INFERBOT_CONFIG, "
            f"or create ./inferbot.toml (see config/example.toml)"
        ) from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the config: {e.strerror}") from None
    config = parse_config(text, str(path))
    if not config.nodes:
        # Valid, and useless: every question would be answered with nothing (and `check` would pass).
        raise ConfigError(f"{path}: the config names no node, so there is nothing to ask — {_ADD_A_NODE}",
                          FIRST_NODE_EXAMPLE)
    return config
