"""A unit's texts parsed with the pure parsers of ``services/parse/``, cached on the text.

A long-running bot asks the same nodes the same questions: ``systemctl show``, the unit file, the command
line, vLLM's logged arguments and the bench files rarely change between two questions, so their parses are
cached on the text. What these return is shared between calls: readers only read it.
"""

from __future__ import annotations

import functools
import json

from services.models import UnitFile, UnitShow, VllmCommand, Warnings
from services.node.probe import UnitRaw
from services.parse import bench as bench_parser
from services.parse import systemd, unitfile, vllm_args, vllm_log

# The caches hold an entry per distinct text, about one per service: sized for fleets past 1,000 services (a
# cache smaller than the fleet misses on every question).
CACHE_ENTRIES = 2048


def file_text(raw: UnitRaw, path: str) -> str | None:
    """A file the probe read for the unit, as text (None: not read, or not readable)."""
    f = raw.files.get(path)
    if f is None or f.data is None:
        return None
    return f.data.decode("utf-8", "replace")


def instance(unit: str) -> str | None:
    """A template unit's instance (``8004`` of ``vllm@8004.service``)."""
    base = unit.removesuffix(".service")
    return base.split("@", 1)[1] if "@" in base else None


def show(raw: UnitRaw, tz: str) -> UnitShow:
    """``systemctl show`` of the unit (an empty one when it failed)."""
    return parse_show(raw.show, tz) if raw.show_rc == 0 else UnitShow(id=raw.unit)


def unit_file(raw: UnitRaw) -> UnitFile:
    """``systemctl cat`` of the unit (an empty one when it failed)."""
    return parse_unit(raw.cat, instance(raw.unit), raw.unit) if raw.cat_rc == 0 else UnitFile()


def command(raw: UnitRaw, argv: list[str], warnings: Warnings) -> VllmCommand:
    """``argv`` read with vLLM's grammar, its ``--config`` file (when the probe read it) merged in."""
    cfg = _yaml_config(raw, argv, warnings)
    # Key order is kept: vLLM turns a nested mapping into JSON in the file's order (a value as passed).
    key = json.dumps(cfg, default=str) if cfg is not None else None
    return _parse_argv(tuple(argv), key)


def _yaml_config(raw: UnitRaw, argv: list[str], warnings: Warnings) -> dict[str, object] | None:
    for i, tok in enumerate(argv[:-1]):
        if tok == "--config":
            path = argv[i + 1]
            text = file_text(raw, path)
            if text is None:
                warnings.add(f"could not read the vLLM --config file {path}: its settings are not shown")
                return None
            import yaml  # only a unit started with --config pays for importing PyYAML

            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError as e:
                warnings.add(f"the vLLM --config file {path} is not valid YAML ({e.__class__.__name__})")
                return None
            return data if isinstance(data, dict) else None
    return None


@functools.lru_cache(maxsize=CACHE_ENTRIES)
def _parse_argv(argv: tuple[str, ...], config_json: str | None) -> VllmCommand:
    cfg = json.loads(config_json) if config_json is not None else None
    return vllm_args.parse_vllm_argv(list(argv), cfg)


@functools.lru_cache(maxsize=CACHE_ENTRIES)
def parse_unit(text: str, instance: str | None, unit_name: str) -> UnitFile:
    """:func:`services.parse.unitfile.parse_unit_cat`, cached."""
    return unitfile.parse_unit_cat(text, instance=instance, unit_name=unit_name)


@functools.lru_cache(maxsize=CACHE_ENTRIES)
def parse_show(text: str, tz: str) -> UnitShow:
    """:func:`services.parse.systemd.parse_show`, cached (it changes only when the unit changes state)."""
    return systemd.parse_show(text, tz_offset=tz)


@functools.lru_cache(maxsize=CACHE_ENTRIES)
def _expand_exec_start(cat: str, instance: str | None, unit_name: str,
                       env: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    return tuple(unitfile.expand_exec_start(parse_unit(cat, instance, unit_name), env=dict(env)))


def declared_argv(raw: UnitRaw, unit: UnitFile, show: UnitShow, env: dict[str, str]) -> list[str]:
    """The command the unit declares: its ExecStart expanded with its environment, else systemd's (lossy) one."""
    if unit.exec_start:
        return list(_expand_exec_start(raw.cat, instance(raw.unit), raw.unit, tuple(env.items())))
    return show.exec_start_argv


@functools.lru_cache(maxsize=CACHE_ENTRIES)
def logged_args(text: str) -> dict[str, object] | None:
    """vLLM's ``non-default args`` start-up line, cached."""
    return vllm_log.parse_non_default_args(text)


@functools.lru_cache(maxsize=4096)
def bench_records(path: str, text: str) -> tuple[dict[str, object], ...]:
    """One benchmark result file's records, cached."""
    return tuple(bench_parser.parse_bench_extract(path, text))
