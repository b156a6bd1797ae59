"""The plan of a settings change: from the unit as systemd sees it (without inferbot's own drop-in), the new
``ExecStart=`` and environment, inferbot's drop-in that holds them, and the difference a person confirms.

The drop-in always holds the whole inferbot delta against the operator's unit, so a second change merges into
the first (its delta is read back from the drop-in's header), and a change back to the unit's own settings
removes the drop-in. The operator's files are read, never written.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from services.change import dropin, execline
from services.change.catalogue import VersionTable
from services.change.execline import ExecLine, NotVllm
from services.change.spec import ChangeSpec
from services.models import FlagValue, UnitFile
from services.node.change import UnitSource
from services.parse import unitfile, vllm_args
from services.redact import REDACTED, Redactor, is_secret_name, iter_secret_env, redact_value
from services.settings_diff import DiffItem

_CAT_HEADER = re.compile(r"^# (/\S+)\s*$")
Action = Literal["write", "remove", "nothing"]


class PlanRefused(BaseModel):
    """Why this unit cannot be changed this way, in one line (nothing was written)."""

    model_config = ConfigDict(extra="forbid")
    reason: str


class Plan(BaseModel):
    """What applying a change does. ``dropin_text`` and ``argv`` may hold the operator's own secrets (they copy
    its command line): they are for the node only and never dumped, stored or shown — show ``dropin_shown``,
    ``command`` and ``diff`` (redacted)."""

    model_config = ConfigDict(extra="forbid")
    unit: str
    dropin_path: str
    action: Action
    form: str
    args_from: int = 0  # where vLLM's own arguments start in ``argv``
    delta: ChangeSpec  # inferbot's whole change against the operator's unit, after this one
    previous: ChangeSpec | None = None  # the same before it (None: no inferbot drop-in)
    diff: list[DiffItem] = Field(default_factory=list)  # before → after, redacted
    command: list[str] = Field(default_factory=list)  # the resulting command line, redacted
    dropin_shown: str = ""  # the drop-in as it will be written, redacted
    notes: list[str] = Field(default_factory=list)
    dropin_text: str | None = Field(default=None, exclude=True, repr=False)
    argv: list[str] = Field(default_factory=list, exclude=True, repr=False)
    env: dict[str, str] = Field(default_factory=dict, exclude=True, repr=False)  # the unit's env after it

    @property
    def changes_nothing(self) -> bool:
        """True when the change would leave the settings as they are."""
        return self.action == "nothing" or not self.diff


def split_cat(text: str) -> list[tuple[str, str]]:
    """``systemctl cat`` output as (path, text) per file, in the order systemd applies them."""
    files: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        m = _CAT_HEADER.match(line)
        if m and (not files or not files[-1][1] or files[-1][1][-1] == ""):
            files.append((m.group(1), []))
        elif files:
            files[-1][1].append(line)
    return [(p, "\n".join(body).strip("\n") + "\n") for p, body in files]


def _join(files: list[tuple[str, str]]) -> str:
    return "\n".join(f"# {p}\n{body}" for p, body in files)


def merge(old: ChangeSpec | None, new: ChangeSpec) -> ChangeSpec:
    """``new`` on top of ``old``: a flag or variable named again takes its new setting."""
    d = old.model_copy(deep=True) if old is not None else ChangeSpec()
    for name, value in new.set_flags.items():
        d.set_flags[name] = value
        d.unset_flags = [n for n in d.unset_flags if n != name]
    for name in new.unset_flags:
        d.set_flags.pop(name, None)
        d.unset_flags = [*[n for n in d.unset_flags if n != name], name]
    for key, val in new.set_env.items():
        d.set_env[key] = val
        d.unset_env = [n for n in d.unset_env if n != key]
    for key in new.unset_env:
        d.set_env.pop(key, None)
        d.unset_env = [*[n for n in d.unset_env if n != key], key]
    return d


def _operator_value(line: ExecLine, name: str) -> FlagValue | None:
    found = line.of(name)
    if not found:
        return None
    o = found[-1]
    words = [w.value for w in line.words[o.first : o.last + 1]]
    _, eq, glued = words[0].partition("=")
    if eq:
        return glued
    if len(words) == 1:
        return not o.negated
    return words[1:] if len(words) > 2 else words[1]


class _Planner:
    def __init__(self, source: UnitSource, table: VersionTable) -> None:
        self.source, self.table = source, table
        self.notes: list[str] = []
        files = split_cat(source.cat)
        self.ours_name = source.dropin_path.rsplit("/", 1)[-1]
        self.operator = [(p, t) for p, t in files if p != source.dropin_path]
        if not self.operator:
            raise _Refuse(f"systemd has no files for {source.unit} (is the unit installed?)")
        self.unit: UnitFile = unitfile.parse_unit_cat(_join(self.operator), unit_name=source.unit)
        if len(self.unit.exec_start_lines) != 1:
            raise _Refuse(f"{source.unit} has {len(self.unit.exec_start_lines)} ExecStart= lines; inferbot changes a "
                          "unit with exactly one")
        try:
            self.line = execline.scan(execline.split(self.unit.exec_start_lines[0], self.unit.specifiers), table)
        except NotVllm as e:
            raise _Refuse(str(e)) from e
        self.env, self.file_env, self.unreadable = self._environment()
        for path in self.unreadable:
            self.notes.append(f"could not read EnvironmentFile {path}: a variable it sets wins over inferbot's "
                              "Environment=")

    def _environment(self) -> tuple[dict[str, str], dict[str, str], list[str]]:
        env = dict(self.unit.environment)
        from_files: dict[str, str] = {}
        unreadable: list[str] = []
        for path, optional in self.unit.environment_files:
            text = self.source.env_files.get(path)
            if text is None:
                if not optional:
                    unreadable.append(path)
                continue
            values = unitfile.parse_env_file(text)
            from_files.update({k: path for k in values})
            env.update(values)
        return env, from_files, unreadable

    def later_dropins(self) -> list[tuple[str, str]]:
        """The operator's drop-ins that systemd applies after inferbot's (their names sort later)."""
        return [(p, t) for p, t in self.operator[1:] if p.rsplit("/", 1)[-1] > self.ours_name]

    def normalise(self, delta: ChangeSpec) -> ChangeSpec:
        """``delta`` without what the operator's unit already says (setting a flag to its value, removing what
        is not there)."""
        out = ChangeSpec()
        known = execline.variable_words(self.line, self.env)
        for name, value in delta.set_flags.items():
            if _operator_value(self.line, name) != value or len(self.line.of(name)) > 1:
                out.set_flags[name] = value
        for name in delta.unset_flags:
            via = [v for v, words in known.items() if any(w.lstrip("-").split("=")[0] == name or
                                                          w.startswith(f"--{name}") for w in words)]
            if via and not self.line.of(name):
                raise _Refuse(f"--{name} comes from ${via[0]} on the command line ({self._where(via[0])}); inferbot "
                              "cannot remove it from there: change it there")
            if self.line.of(name):
                out.unset_flags.append(name)
        for key, val in delta.set_env.items():
            if key in self.file_env:
                raise _Refuse(f"{key} is set in EnvironmentFile {self.file_env[key]}, which wins over Environment=: "
                              "change it there")
            if self.env.get(key) != val:
                out.set_env[key] = val
        # a variable only an unreadable EnvironmentFile might set: UnsetEnvironment= is kept, harmless otherwise
        out.unset_env = [k for k in delta.unset_env if k in self.env or self.unreadable]
        return out

    def _where(self, var: str) -> str:
        return f"set in {self.file_env[var]}" if var in self.file_env else "set by Environment="

    def conflicts(self, delta: ChangeSpec) -> None:
        """Refuse when an operator drop-in applied after inferbot's would undo part of the change."""
        for path, text in self.later_dropins():
            later = unitfile.parse_unit_cat(f"# {path}\n{text}", unit_name=self.source.unit)
            keys = {ln.partition("=")[0].strip() for _, ln in unitfile.logical_lines(text) if "=" in ln}
            if (delta.set_flags or delta.unset_flags) and "ExecStart" in keys:
                raise _Refuse(f"{path} sets ExecStart= and systemd applies it after {self.ours_name}, so the change "
                              "would not take effect: rename one of them or set [services.changes] dropin")
            clash = sorted(set(later.environment) & (set(delta.set_env) | set(delta.unset_env)))
            if clash or ("UnsetEnvironment" in keys and delta.unset_env):
                raise _Refuse(f"{path} sets {', '.join(clash) or 'UnsetEnvironment='} and systemd applies it after "
                              f"{self.ours_name}: change it there")


class _Refuse(Exception):
    pass


def _env_after(env: dict[str, str], delta: ChangeSpec) -> dict[str, str]:
    out = {k: v for k, v in env.items() if k not in delta.unset_env}
    out.update(delta.set_env)
    return out


def _argv(p: _Planner, delta: ChangeSpec) -> tuple[list[str], dict[str, str], execline.Edited | None]:
    env = _env_after(p.env, delta)
    edited = None
    if delta.set_flags or delta.unset_flags:
        edited = execline.apply(p.line, delta.set_flags, delta.unset_flags)
    text = edited.text(dropin.exec_word) if edited is not None else p.unit.exec_start_lines[0]
    return unitfile.split_command(text, env, p.unit.specifiers), env, edited


def _redactor(argvs: list[list[str]], envs: list[dict[str, str]]) -> Redactor:
    r = Redactor()
    for argv in argvs:
        cmd = vllm_args.parse_vllm_argv(argv)
        r.add(*vllm_args.secret_values(cmd))
        r.add_from(cmd.flags)
    for env in envs:
        r.add(*iter_secret_env(env))
    return r


def _shown(value: FlagValue | None, name: str, r: Redactor) -> FlagValue | None:
    if value is None or isinstance(value, bool):
        return value
    red = redact_value(name, value) if isinstance(value, str) else [str(redact_value(name, v)) for v in value]
    if isinstance(red, list):
        return [r.text(str(v)) for v in red]
    return r.text(str(red))


def redact_argv(argv: list[str], r: Redactor) -> list[str]:
    """A command line for people: a secret flag's values as ``[redacted]``, known secrets anywhere."""
    out: list[str] = []
    secret_next = False
    for word in argv:
        if secret_next and not word.startswith("-"):
            out.append(REDACTED)
            continue
        name, eq, _ = word.partition("=")
        secret_next = word.startswith("--") and is_secret_name(name) and not eq
        out.append(f"{name}={REDACTED}" if word.startswith("--") and eq and is_secret_name(name) else r.text(word))
    return out


def _diff(before: tuple[list[str], dict[str, str]], after: tuple[list[str], dict[str, str]],
          r: Redactor) -> list[DiffItem]:
    fa, fb = vllm_args.parse_vllm_argv(before[0]).flags, vllm_args.parse_vllm_argv(after[0]).flags
    out: list[DiffItem] = []
    for key in sorted(set(fa) | set(fb)):
        if fa.get(key) != fb.get(key):
            out.append(DiffItem(kind="flag", key=key, old=_shown(fa.get(key), key, r), new=_shown(fb.get(key), key, r)))
    ea, eb = before[1], after[1]
    for key in sorted(set(ea) | set(eb)):
        if ea.get(key) != eb.get(key):
            old, new = ea.get(key), eb.get(key)
            out.append(DiffItem(kind="env", key=key, old=None if old is None else r.text(str(redact_value(key, old))),
                                new=None if new is None else r.text(str(redact_value(key, new)))))
    return out


def plan_change(source: UnitSource, spec: ChangeSpec, table: VersionTable, change_id: str, *,
                replace: bool = False) -> Plan | PlanRefused:
    """What applying ``spec`` to ``source``'s unit does: ``spec`` merged into inferbot's earlier changes, or with
    ``replace`` the whole of inferbot's change becomes ``spec`` (a rollback to an earlier delta; an empty
    ``spec`` is a revert to the operator's unit)."""
    previous: ChangeSpec | None = None
    if source.dropin_text is not None:
        previous = dropin.read_delta(source.dropin_text)
        if previous is None:
            return PlanRefused(reason=f"{source.dropin_path} exists but inferbot did not write it (no inferbot "
                                      "header): move it away, or point [services.changes] dropin elsewhere")
    try:
        p = _Planner(source, table)
        delta = p.normalise(spec if replace else merge(previous, spec))
        p.conflicts(delta)
        before_delta = p.normalise(previous) if previous is not None else ChangeSpec()
    except _Refuse as e:
        return PlanRefused(reason=str(e))
    argv, env, edited = _argv(p, delta)
    before_argv, before_env, _ = _argv(p, before_delta)
    line = edited.text(dropin.exec_word) if edited is not None else None
    text = dropin.render(source.unit, source.dropin_path, delta, line, change_id) if not delta.is_empty() else None
    r = _redactor([argv, before_argv], [env, before_env])
    diff = _diff((before_argv, before_env), (argv, env), r)
    action: Action = "write" if text is not None else ("remove" if source.dropin_text is not None else "nothing")
    if not diff and (text is None or source.dropin_text is not None):
        action = "nothing"
    shown = ""
    if text is not None:
        exec_shown = edited.text(lambda w: dropin.exec_word(r.text(w))) if edited is not None else None
        if exec_shown is not None:
            exec_shown = " ".join(redact_argv(exec_shown.split(" "), r))
        shown = "".join(r.text(ln) + "\n" for ln in dropin.render(source.unit, source.dropin_path, delta, exec_shown,
                                                                   change_id).splitlines())
    return Plan(unit=source.unit, dropin_path=source.dropin_path, action=action, form=p.line.form,
                args_from=p.line.args_from, delta=delta, previous=previous, diff=diff, command=redact_argv(argv, r),
                notes=p.notes, dropin_shown=shown, dropin_text=text, argv=argv, env=env)


def shown_dropin(text: str) -> str:
    """A drop-in as people may see it: the secrets of its ``ExecStart=`` (and any secret shape) redacted."""
    words: list[str] = []
    for line in text.splitlines():
        if line.startswith("ExecStart=") and line != "ExecStart=":
            words = [w for w, _, _ in unitfile.command_word_spans(line[len("ExecStart="):], {})]
    r = _redactor([words] if words else [], [])
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith("ExecStart=") and line != "ExecStart=":
            out.append("ExecStart=" + " ".join(dropin.exec_word(w) if w != REDACTED else w
                                               for w in redact_argv(words, r)))
        else:
            out.append(r.text(line))
    return "\n".join(out) + "\n"
