"""Programs that run another program: what a command line starts once its launchers are set aside.

``exec``, ``env [-i] [-u NAME] NAME=V …``, a shell's ``NAME=V`` prefixes and the wrappers in ``WRAPPERS``
(``sudo -u X``, ``numactl …``, ``uv run``, ``conda run``, ``su -c SCRIPT``…) are read the way each program
reads its own options, so the words they run are found without running anything. Knows nothing of vLLM.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
"""A shell's or ``env``'s ``NAME=value`` word."""


def program_name(path: str) -> str:
    """The program a path names (``/usr/bin/sudo`` → ``sudo``)."""
    return path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class _Wrapper:
    """A program that runs another one: its options that take a value, and words before the command."""

    value_opts: frozenset[str] = frozenset()
    positionals: int = 0  # words after the options and before the command (chrt's priority, taskset's mask)
    subcommand: str | None = None  # `uv run`, `conda run`
    script_opts: frozenset[str] = frozenset()  # options whose value is a shell script (`su -c`)
    user_positional: bool = False  # `su USER`, `runuser USER` (unless -u is given)


def _opts(*names: str) -> frozenset[str]:
    return frozenset(names)


_RUN_VALUE_OPTS = _opts(
    "--python", "-p", "--project", "--directory", "--with", "--with-editable", "--with-requirements",
    "--env-file", "--extra", "--group", "--only-group", "--package", "--index", "--index-url",
    "--extra-index-url", "--find-links", "-f", "--from", "--cache-dir", "--config-file", "-w", "--color",
    "--python-preference", "--index-strategy", "--keyring-provider", "--resolution", "--prerelease",
    "--exclude-newer", "--link-mode", "--config-setting", "-C", "-n", "--name", "--prefix", "--cwd",
    "-e", "--environment", "--manifest-path",
)
# Programs that run a command given after their own options. Each either execs it (numactl, taskset,
# nice, chrt, setpriv, env: the process's argv is then the server's) or stays as its parent (sudo, uv
# run, conda run: the server is a child in the same cgroup). Either way the unit's ExecStart= shows them.
_WRAPPERS: dict[str, _Wrapper] = {
    "sudo": _Wrapper(_opts("-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U", "--user", "--group",
                           "--close-from", "--chdir", "--host", "--prompt", "--role", "--type",
                           "--command-timeout", "--other-user")),
    "runuser": _Wrapper(_opts("-u", "-g", "-G", "-s", "-w", "--user", "--group", "--supp-group", "--shell",
                              "--whitelist-environment"), script_opts=_opts("-c", "--command",
                              "--session-command"), user_positional=True),
    "su": _Wrapper(_opts("-g", "-G", "-s", "-w", "--group", "--supp-group", "--shell", "--whitelist-environment"),
                   script_opts=_opts("-c", "--command", "--session-command"), user_positional=True),
    "setpriv": _Wrapper(_opts("--reuid", "--regid", "--ruid", "--rgid", "--euid", "--egid", "--groups",
                              "--inh-caps", "--ambient-caps", "--bounding-set", "--securebits", "--pdeathsig",
                              "--selinux-label", "--apparmor-profile", "--landlock-access", "--landlock-rule",
                              "--seccomp-filter")),
    "nice": _Wrapper(_opts("-n", "--adjustment")),
    "ionice": _Wrapper(_opts("-c", "-n", "--class", "--classdata")),
    "chrt": _Wrapper(_opts("-T", "-P", "-D", "--sched-runtime", "--sched-period", "--sched-deadline"),
                     positionals=1),
    "numactl": _Wrapper(_opts("-N", "-m", "-i", "-C", "-p", "-P", "-w", "--cpunodebind", "--membind",
                              "--interleave", "--physcpubind", "--preferred", "--preferred-many",
                              "--weighted-interleave", "--cpubind")),
    "taskset": _Wrapper(positionals=1),
    "stdbuf": _Wrapper(_opts("-i", "-o", "-e", "--input", "--output", "--error")),
    "timeout": _Wrapper(_opts("-k", "-s", "--kill-after", "--signal"), positionals=1),
    "prlimit": _Wrapper(),
    "nohup": _Wrapper(),
    "setsid": _Wrapper(),
    "tini": _Wrapper(_opts("-p", "-e")),
    "dumb-init": _Wrapper(_opts("-r", "--rewrite")),
    "uv": _Wrapper(_RUN_VALUE_OPTS, subcommand="run"),
    "uvx": _Wrapper(_RUN_VALUE_OPTS),
    "conda": _Wrapper(_RUN_VALUE_OPTS, subcommand="run"),
    "mamba": _Wrapper(_RUN_VALUE_OPTS, subcommand="run"),
    "micromamba": _Wrapper(_RUN_VALUE_OPTS, subcommand="run"),
    "poetry": _Wrapper(_RUN_VALUE_OPTS, subcommand="run"),
    "pipenv": _Wrapper(_RUN_VALUE_OPTS, subcommand="run"),
    "pdm": _Wrapper(_RUN_VALUE_OPTS, subcommand="run"),
    "pixi": _Wrapper(_RUN_VALUE_OPTS, subcommand="run"),
    "hatch": _Wrapper(_RUN_VALUE_OPTS, subcommand="run"),
}  # fmt: skip



@dataclass
class Launched:
    """A command line with its launchers set aside."""

    command: list[str]  # what the launchers run (empty when a wrapper runs a shell script instead)
    launcher: list[str] = field(default_factory=list)  # the wrappers' words, in order
    script: str | None = None  # the shell script a wrapper runs (`su -c SCRIPT`, `runuser -c SCRIPT`)


def is_launcher(word: str) -> bool:
    """True when ``word`` names a program that runs another one (a wrapper, or ``env``)."""
    name = program_name(word)
    return name in _WRAPPERS or name == "env"


def skip_launchers(argv: list[str]) -> Launched:
    """Drop ``exec``, ``env [-i] [-u N] NAME=V …``, shell ``NAME=V`` prefixes and wrappers (``sudo -u X``,
    ``numactl …``, ``uv run``…) in front of a command; the wrappers' words are kept in ``launcher``."""
    launcher: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "exec" or ENV_ASSIGN.match(tok):
            i += 1
        elif program_name(tok) == "env":
            i += 1
            while i < len(argv) and (argv[i].startswith("-") or ENV_ASSIGN.match(argv[i])):
                i += 2 if argv[i] in ("-u", "--unset", "-C", "--chdir", "-S") else 1
        elif program_name(tok) in _WRAPPERS:
            found = _skip_wrapper(argv[i:], _WRAPPERS[program_name(tok)])
            if found is None:
                break
            rest, script = found
            if script is not None:
                launcher.extend(a for a in argv[i:] if a != script)
                return Launched([], launcher, script)
            launcher.extend(argv[i : len(argv) - len(rest)])
            argv, i = rest, 0
        else:
            break
    return Launched(argv[i:], launcher)


def _skip_wrapper(argv: list[str], w: _Wrapper) -> tuple[list[str], str | None] | None:
    """(the wrapped command, or a shell script when the wrapper takes one) or None if it runs nothing."""
    i = 1
    if w.subcommand is not None:
        if argv[1:2] == ["tool", "run"] or argv[1:2] == [w.subcommand]:
            i = 3 if argv[1] == "tool" else 2
        else:
            return None
    positionals = w.positionals
    user_given = False
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            i += 1
            break
        name, eq, _value = tok.partition("=")
        if tok.startswith("-") and tok != "-" and len(tok) > 1:
            if name in w.script_opts:
                script = _value if eq else (argv[i + 1] if i + 1 < len(argv) else "")
                return [], script
            if name in ("-u", "--user"):
                user_given = True
            if name in w.value_opts and not eq:
                i += 2
                continue
            # Glued short option with its value (numactl -N0, stdbuf -oL) or a bare switch.
            i += 1
            continue
        if ENV_ASSIGN.match(tok):
            i += 1
            continue
        if w.user_positional and not user_given:
            user_given = True  # `su vllm -c …`: the user, options may follow
            i += 1
            continue
        if positionals:
            positionals -= 1
            i += 1
            continue
        break
    if w.script_opts:
        # `su -c` may come after the user: look again for it.
        for j in range(i, len(argv) - 1):
            if argv[j] in w.script_opts:
                return [], argv[j + 1]
    return argv[i:], None

