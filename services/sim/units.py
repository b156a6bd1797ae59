"""What the simulated systemd needs from a unit's files to run it and to render ``systemctl show``.

Value semantics (quoting, escapes, ``$VAR``/``${VAR}``, ``%`` specifiers, env files) come from the
simulator's own ``services.sim.systemd_syntax``, never from the product's ``services.parse.unitfile``: the
simulator is the test's truth and must not share the bugs of the code under test.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from services.sim.systemd_syntax import (
    command_words,
    environment_file,
    environment_line,
    expand_argv,
    name_specifiers,
    unit_lines,
)

_PREFIX_CHARS = "-@:+!|"


@dataclass
class ExecLine:
    raw: str
    path: str  # the program systemd executes
    display_argv: list[str]  # as `systemctl show` prints argv[] ($VAR unexpanded, %i expanded)
    ignore_errors: bool
    argv0_override: bool
    no_env: bool

    def argv(self, env: dict[str, str], spec: dict[str, str]) -> list[str]:
        """The argv the process gets (environment expanded)."""
        rest = self.raw.lstrip()
        while rest and rest[0] in _PREFIX_CHARS:
            rest = rest[1:]
        words = command_words(rest, spec)
        if not self.no_env:
            words = expand_argv(words, env)
        return words[1:] if self.argv0_override else words


@dataclass
class LoadedUnit:
    """A unit as systemd loaded it at the last daemon-reload."""

    name: str
    fragment: Path
    drop_ins: list[Path]
    description: str = ""
    exec_start: ExecLine | None = None
    exec_start_pre: list[ExecLine] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)  # Environment= (merged, first position kept)
    environment_files: list[tuple[str, bool]] = field(default_factory=list)  # (path, optional)
    restart: str = "no"
    restart_sec: float = 0.1
    start_limit_interval_s: float = 10.0
    start_limit_burst: int = 5
    timeout_stop_s: float | None = None
    kill_mode: str = "control-group"
    user: str = ""
    working_directory: str = ""
    standard_output: str = "journal"
    wanted_by: list[str] = field(default_factory=list)
    specifiers: dict[str, str] = field(default_factory=dict)

    @property
    def paths(self) -> list[Path]:
        return [self.fragment, *self.drop_ins]

    def file_environment(self) -> dict[str, str]:
        """Environment= values overridden by the EnvironmentFile= values (read now, like at each start)."""
        env = dict(self.environment)
        for path, optional in self.environment_files:
            try:
                text = Path(path).read_text()
            except OSError:
                if optional:
                    continue
                raise
            env.update(environment_file(text))
        return env


def _timespan(value: str) -> float:
    """systemd time spans: ``30``, ``30s``, ``2min``, ``1h 5min``, ``500ms``, ``infinity``."""
    value = value.strip()
    if value in ("infinity", ""):
        return float("inf") if value else 0.0
    units = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hr": 3600.0,
             "d": 86400.0}  # fmt: skip
    total = 0.0
    for part in value.split():
        num = part.rstrip("abcdefghijklmnopqrstuvwxyz")
        unit = part[len(num) :] or "s"
        total += float(num) * units.get(unit, 1.0)
    return total


def exec_line(value: str, spec: dict[str, str]) -> ExecLine:
    raw = value.strip()
    prefix = ""
    rest = raw
    while rest and rest[0] in _PREFIX_CHARS:
        prefix += rest[0]
        rest = rest[1:]
    words = command_words(rest, spec)
    path = words[0] if words else ""
    if path and "/" not in path:
        path = shutil.which(path, path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") or path
    display = words[1:] if "@" in prefix else words
    return ExecLine(raw=raw, path=path, display_argv=display, ignore_errors="-" in prefix,
                    argv0_override="@" in prefix, no_env=":" in prefix)  # fmt: skip


def load_unit(name: str, fragment: Path, extra_specifiers: dict[str, str] | None = None) -> LoadedUnit:
    """Read the fragment and its ``NAME.d/*.conf`` drop-ins (and the template's, for instances)."""
    dropin_dirs = [Path(str(fragment) + ".d")]
    if fragment.name != name:
        dropin_dirs.append(fragment.parent / (name + ".d"))
    drop_ins: list[Path] = []
    for d in dropin_dirs:
        if d.is_dir():
            drop_ins.extend(sorted(p for p in d.iterdir() if p.suffix == ".conf"))
    drop_ins.sort(key=lambda p: p.name)
    spec = name_specifiers(name)
    spec.update({"h": "/root", "u": "root", "U": "0", "H": os.uname().nodename, "t": "/run"})
    if extra_specifiers:
        spec.update(extra_specifiers)
    unit = LoadedUnit(name=name, fragment=fragment, drop_ins=drop_ins, specifiers=spec)
    for path in unit.paths:
        section = ""
        for line in unit_lines(path.read_text()):
            if line.startswith("[") and line.endswith("]"):
                section = line[1:-1]
                continue
            key, eq, value = line.partition("=")
            if not eq:
                continue
            _apply(unit, section, key.strip(), value.strip(), spec)
    return unit


def _apply(u: LoadedUnit, section: str, key: str, value: str, spec: dict[str, str]) -> None:
    if section == "Unit":
        if key == "Description":
            u.description = value.replace("%i", spec.get("i", "")).replace("%n", u.name)
        elif key in ("StartLimitIntervalSec", "StartLimitInterval"):
            u.start_limit_interval_s = _timespan(value)
        elif key == "StartLimitBurst":
            u.start_limit_burst = int(value)
    elif section == "Install":
        if key == "WantedBy":
            u.wanted_by.extend(value.split())
    elif section == "Service":
        if key == "ExecStart":
            u.exec_start = exec_line(value, spec) if value else None
        elif key == "ExecStartPre":
            if value:
                u.exec_start_pre.append(exec_line(value, spec))
            else:
                u.exec_start_pre.clear()
        elif key == "Environment":
            assigned = environment_line(value, spec)
            if assigned is None:
                u.environment.clear()
            else:
                u.environment.update(assigned)
        elif key == "EnvironmentFile":
            if not value:
                u.environment_files.clear()
            else:
                optional = value.startswith("-")
                u.environment_files.append((value[1:] if optional else value, optional))
        elif key == "Restart":
            u.restart = value
        elif key == "RestartSec":
            u.restart_sec = _timespan(value)
        elif key in ("StartLimitIntervalSec", "StartLimitBurst"):
            _apply(u, "Unit", key, value, spec)
        elif key == "TimeoutStopSec":
            u.timeout_stop_s = _timespan(value)
        elif key == "KillMode":
            u.kill_mode = value
        elif key == "User":
            u.user = value
        elif key == "WorkingDirectory":
            u.working_directory = value.lstrip("-")
        elif key == "StandardOutput":
            u.standard_output = value
