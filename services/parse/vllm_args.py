"""Read a vLLM server command line the way vLLM's own argument parser reads it.

Input is a full argv (``/proc/PID/cmdline`` or a unit's ExecStart), wrapped in whatever starts vLLM
(``services/parse/vllm_unwrap.py`` finds the vLLM part). Output is a ``VllmCommand`` with flags keyed by
their long name, the model and where it came from, and notes for a person. What vLLM's flags are lives in
``services/parse/vllm_flags.py``; its public names are importable from here too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from services.models import FlagValue, VllmCommand
from services.parse.launchers import is_launcher
from services.parse.vllm_flags import (
    FLAG_GROUPS,
    KNOWN_SWITCHES,
    MODEL_FLAG_DEPRECATED,
    MULTI_VALUE_FLAGS,
    OPTIONAL_VALUE_FLAGS,
    REMOVED_ENV,
    REMOVED_FLAGS,
    SECRET_FLAGS,
    SHORT_ALIASES,
    flag_group,
    group_flags,
    looks_like_flag,
    normalise_long,
    prefix_match,
    removed_env_warnings,
    removed_flag_warnings,
    resolve_short,
)
from services.parse.vllm_unwrap import API_SERVER_MODULE, Launch, Mode, unwrap
from services.redact import is_secret_name

__all__ = [
    "FLAG_GROUPS", "KNOWN_SWITCHES", "MODEL_FLAG_DEPRECATED", "MULTI_VALUE_FLAGS", "OPTIONAL_VALUE_FLAGS",
    "REMOVED_ENV", "REMOVED_FLAGS", "SECRET_FLAGS", "SHORT_ALIASES", "flag_group", "format_flag_value",
    "group_flags", "is_wrapped", "parse_vllm_argv", "removed_env_warnings", "removed_flag_warnings",
    "secret_values",
]  # fmt: skip

_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@'\"]+:(?P<pw>[^@\s/'\"]+)@")
ModelSource = Literal["positional", "flag", "config"]


@dataclass
class _CommandLine:
    """The command line's own words, read: flags, the words that are not flags, the ``--model`` value."""

    flags: dict[str, FlagValue] = field(default_factory=dict)
    positionals: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # single-dash options vLLM does not have
    model_flag: str | None = None


def parse_vllm_argv(argv: list[str], config_yaml: Mapping[str, object] | None = None) -> VllmCommand:
    """Unwrap and normalise a full vLLM server argv into a ``VllmCommand``.

    ``config_yaml`` is the already-loaded mapping of the ``--config FILE`` the command names; its values
    come first and the command line wins, as in vLLM. Values are kept as strings exactly as written;
    switches are True, ``--no-X`` is False, nargs="+" flags are lists. Secret values are kept too: redact
    before rendering (``secret_values`` lists them).
    """
    launch = unwrap(argv)
    if launch.mode is None:
        return VllmCommand(wrapper="unknown", notes=[*launch.notes, "No `vllm serve` or vLLM api_server found."])
    notes = launch.notes
    cli, config_file, config_loaded = _take_config(launch.args, notes)
    flags: dict[str, FlagValue] = {}
    config_model: str | None = None
    if config_loaded and config_yaml is not None:
        cfg_flags, config_model = _config_flags(config_yaml, notes)
        flags.update(cfg_flags)
    elif config_loaded:
        notes.append(f"Settings from the config file {config_file} are not included (file not read).")
    line = _read_command_line(cli, notes)
    flags.update(line.flags)  # the command line wins over the file, as in vLLM
    model, source, positionals = _choose_model(launch.mode, line, config_model, notes)
    unknown = line.unknown
    if positionals:
        unknown.extend(positionals)
        notes.append('Words vLLM does not accept ("unrecognized arguments"): ' + " ".join(positionals))
    return VllmCommand(
        wrapper=_wrapper(launch),
        model=model,
        model_source=source,
        flags=flags,
        config_file=config_file,
        docker_image=launch.docker_image,
        docker_env=launch.docker_env,
        docker_env_files=launch.docker_env_files,
        unknown_flags=unknown,
        notes=notes,
        launcher=launch.launcher,
        entry=launch.entry,
    )


def _wrapper(launch: Launch) -> Literal["vllm-serve", "api-server-module", "bash", "docker"]:
    """The outermost way vLLM was started, as ``VllmCommand.wrapper`` names it."""
    if launch.saw_docker:
        return "docker"
    if launch.saw_shell:
        return "bash"
    return "vllm-serve" if launch.mode == "serve" else "api-server-module"


def _take_config(args: list[str], notes: list[str]) -> tuple[list[str], str | None, bool]:
    """(the other arguments, the ``--config`` file named, whether vLLM loads it)."""
    # Only the two-word `--config PATH` is loaded by vLLM; pull it out first so the merge order is right.
    cli: list[str] = []
    config_file: str | None = None
    config_loaded = False
    i = 0
    while i < len(args):
        if args[i] == "--config" and i + 1 < len(args):
            config_file, config_loaded = args[i + 1], True
            i += 2
            continue
        if args[i].startswith("--config="):
            config_file = args[i].split("=", 1)[1]
            notes.append("vLLM only loads `--config FILE` (two words); `--config=FILE` is not read.")
            i += 1
            continue
        cli.append(args[i])
        i += 1
    return cli, config_file, config_loaded


def _config_flags(
    config_yaml: Mapping[str, object], notes: list[str]
) -> tuple[dict[str, FlagValue], str | None]:
    """Convert a ``--config`` YAML mapping the way vLLM does; returns (flags, model from the file)."""
    flags: dict[str, FlagValue] = {}
    model: str | None = None
    for raw_key, value in config_yaml.items():
        key = normalise_long(str(raw_key))
        if key == "config":
            continue
        if key == "model":
            model = str(value)
            continue
        if isinstance(value, bool):
            if value:
                flags[key] = True
            else:
                # vLLM generates nothing for false, so the default stays: say so, it surprises people.
                notes.append(f"The config file sets `{raw_key}: false`; vLLM ignores it (default applies).")
        elif isinstance(value, list):
            if value:
                flags[key] = [str(v) for v in value]
        elif isinstance(value, dict):
            flags[key] = json.dumps(value)
        else:
            flags[key] = str(value)
    return flags, model




def _read_command_line(cli: list[str], notes: list[str]) -> _CommandLine:
    """Read the arguments the way vLLM's argparse parser does (``--config`` already taken out)."""
    line = _CommandLine()
    i = 0
    while i < len(cli):
        tok = cli[i]
        i += 1
        if tok == "--":
            line.positionals.extend(cli[i:])
            break
        if not looks_like_flag(tok):
            line.positionals.append(tok)
            continue
        name, explicit = _flag_name(tok, notes)
        if name is None:
            line.unknown.append(tok)
            continue
        if name == "model":
            if explicit is None and i < len(cli) and not looks_like_flag(cli[i]):
                explicit = cli[i]
                i += 1
            line.model_flag = explicit
            continue
        i = _take_value(line.flags, name, explicit, cli, i)
    return line


def _flag_name(tok: str, notes: list[str]) -> tuple[str | None, str | None]:
    """(the long name an option word means, its ``=value``); the name is None for an unknown short option."""
    if not tok.startswith("--"):
        return resolve_short(tok[1:])
    raw_name, eq, value = tok[2:].partition("=")
    name = normalise_long(raw_name)
    if not name.startswith("no-"):
        matched = prefix_match(name)
        if matched is not None:
            notes.append(f"`--{raw_name}` is read as `--{matched}` (argparse takes unique prefixes).")
            name = matched
    return name, (value if eq else None)


def _take_value(flags: dict[str, FlagValue], name: str, explicit: str | None, cli: list[str], i: int) -> int:
    """Set flag ``name`` from its ``=value`` or the words from ``cli[i]`` on; the index after what it took."""
    if explicit is not None:
        flags[name] = [explicit] if name in MULTI_VALUE_FLAGS else explicit
    elif name.startswith("no-") and "." not in name:
        flags[name[3:]] = False
    elif name in KNOWN_SWITCHES:
        flags[name] = True
    elif name in MULTI_VALUE_FLAGS:
        values: list[str] = []
        while i < len(cli) and not looks_like_flag(cli[i]):
            values.append(cli[i])
            i += 1
        flags[name] = values
    elif i < len(cli) and not looks_like_flag(cli[i]):
        flags[name] = cli[i]
        i += 1
    else:
        flags[name] = True
    return i


def _choose_model(mode: Mode, line: _CommandLine, config_model: str | None,
                  notes: list[str]) -> tuple[str | None, ModelSource | None, list[str]]:
    """(the model vLLM serves, where it was given, the positional words left over) as vLLM chooses it."""
    positionals = line.positionals
    model: str | None = None
    source: ModelSource | None = None
    if mode == "serve":
        if positionals:
            model, source = positionals[0], "positional"
            positionals = positionals[1:]
        elif line.model_flag is not None:
            model, source = line.model_flag, "flag"
        elif config_model is not None:
            model, source = config_model, "config"
        if line.model_flag is not None:
            notes.append(MODEL_FLAG_DEPRECATED)
    else:
        if positionals:
            notes.append(
                f"`{positionals[0]}` is ignored by `python -m {API_SERVER_MODULE}`: only `--model` selects "
                "the model there."
            )
            positionals = positionals[1:]
        if line.model_flag is not None:
            model, source = line.model_flag, "flag"
        elif config_model is not None:
            model, source = config_model, "config"
    if model is None:
        notes.append("No model on the command line: vLLM would serve its default model Qwen/Qwen3-0.6B.")
    return model, source, positionals


def secret_values(cmd: VllmCommand) -> list[str]:
    """Every secret value in ``cmd``: API keys, an HF token, URL passwords, secret-named docker env values."""
    found: list[str] = []
    for name in SECRET_FLAGS:
        value = cmd.flags.get(name)
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list):
            found.extend(value)
    texts: list[str] = [cmd.model or ""]
    for value in cmd.flags.values():
        if isinstance(value, str):
            texts.append(value)
        elif isinstance(value, list):
            texts.extend(value)
    for text in texts:
        found.extend(m["pw"] for m in _URL_PASSWORD.finditer(text))
    found.extend(v for k, v in cmd.docker_env.items() if v and is_secret_name(k))
    return list(dict.fromkeys(v for v in found if v))


def is_wrapped(cmd: VllmCommand) -> bool:
    """True when something runs in front of the vLLM program (``sudo``, ``uv run``, an unknown launcher):
    it may stay as the parent, so the server can be another process. An interpreter and the launcher
    script of a ``serve`` subcommand (``python /opt/serve_model.py serve …``) are the server itself."""
    if not cmd.launcher:
        return False
    if any(n.startswith("Started through") for n in cmd.notes):
        return True
    return any(is_launcher(w) for w in cmd.launcher) or cmd.entry != "serve-subcommand"


def format_flag_value(value: object, missing: str = "(not set)") -> str:
    """A flag value for people: switches as true/false, lists space-separated, ``missing`` for None."""
    if value is None:
        return missing
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return " ".join(str(x) for x in value)
    return str(value)

