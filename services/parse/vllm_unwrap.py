"""Find the vLLM part of a command line: the arguments vLLM's own parser sees, and how the line got there.

Input is a full argv (``/proc/PID/cmdline`` or a unit's ExecStart): ``vllm serve``, a console script run
by its interpreter, ``python -m vllm.entrypoints.openai.api_server``, a launcher script with a ``serve``
subcommand, any of those behind wrappers (``services/parse/launchers.py``), inside ``bash -c '…'``
(``services/parse/shell_script.py``) or ``docker run … IMAGE …`` (``services/parse/docker_run.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

from services.parse import shell_script
from services.parse.docker_run import DockerRun, docker_run
from services.parse.launchers import program_name, skip_launchers
from services.parse.vllm_flags import GENERIC_FLAGS, KNOWN_NAMES, looks_like_flag, normalise_long, resolve_short

Mode = Literal["serve", "module"]
"""How vLLM's parser reads the arguments: ``vllm serve`` (the model may be positional) or the api_server
module (only ``--model``)."""
Entry = Literal["vllm", "module", "serve-subcommand"]
API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_MAX_DEPTH = 4  # shells and containers inside each other, at most


@dataclass
class Launch:
    """How a command line reaches vLLM: what it passes through on the way, and what is worth saying."""

    mode: Mode | None = None  # None: no vLLM found
    args: list[str] = field(default_factory=list)  # the arguments vLLM's parser sees
    saw_docker: bool = False
    saw_shell: bool = False
    docker_image: str | None = None
    docker_env: dict[str, str] = field(default_factory=dict)
    docker_env_files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    launcher: list[str] = field(default_factory=list)  # wrapper words in front of the vLLM program
    entry: Entry | None = None


def unwrap(argv: list[str]) -> Launch:
    """The vLLM part of ``argv`` (``mode`` None when there is none) and the way to it."""
    st = Launch()
    found = _unwrap(list(argv), st)
    if found is not None:
        st.mode, st.args = found
    return st


def _unwrap(argv: list[str], st: Launch, depth: int = 0) -> tuple[Mode, list[str]] | None:
    """Find the vLLM part of ``argv``: (parser mode, the arguments vLLM's parser sees) or None."""
    if depth > _MAX_DEPTH:
        return None
    launched = skip_launchers(argv)
    st.launcher.extend(launched.launcher)
    if launched.script is not None:
        st.saw_shell = True
        return _unwrap_shell(launched.script, st, depth)
    argv = launched.command
    if not argv:
        return None
    head = program_name(argv[0])
    run = docker_run(argv)
    if run is not None:
        return _unwrap_docker(run, st, depth)
    if head in shell_script.SHELLS:
        script = shell_script.shell_script(argv)
        if script is not None:
            st.saw_shell = True
            return _unwrap_shell(script, st, depth)
    if head == "vllm" and argv[1:2] == ["serve"]:
        st.entry = "vllm"
        return "serve", argv[2:]
    if _PYTHON.match(head):
        found = _unwrap_python(argv, st)
        if found is not None:
            return found
    elif argv[1:2] == ["serve"] and _vllm_like(argv[2:]):
        # A launcher script of another name with vLLM's grammar: `/opt/bin/serve_model serve /models/x -tp 8`.
        st.entry = "serve-subcommand"
        st.launcher.append(argv[0])
        return "serve", argv[2:]
    return _search_inside(argv, st)


def _search_inside(argv: list[str], st: Launch) -> tuple[Mode, list[str]] | None:
    """Launchers we do not model: look for the vLLM part among their words."""
    for i in range(1, len(argv) - 1):
        if program_name(argv[i]) == "vllm" and argv[i + 1] == "serve":
            st.notes.append(f"Started through `{argv[0]}`; read the vLLM arguments after `vllm serve`.")
            st.entry = "vllm"
            st.launcher.extend(argv[:i])
            return "serve", argv[i + 2 :]
        if argv[i] == "-m" and argv[i + 1] == API_SERVER_MODULE:
            st.notes.append(f"Started through `{argv[0]}`; read the arguments after `-m {argv[i + 1]}`.")
            st.entry = "module"
            st.launcher.extend(argv[:i])
            return "module", argv[i + 2 :]
    for i in range(1, len(argv) - 1):
        if argv[i] == "serve" and _vllm_like(argv[i + 1 :]):
            st.notes.append(f"Started through `{argv[0]}`; read vLLM arguments after its `serve` subcommand.")
            st.entry = "serve-subcommand"
            st.launcher.extend(argv[:i])
            return "serve", argv[i + 1 :]
    return None


def _vllm_like(args: list[str]) -> bool:
    """True when ``args`` (after a ``serve`` word) carry at least one flag only vLLM has."""
    for tok in args:
        if not looks_like_flag(tok):
            continue
        if tok.startswith("--"):
            name = normalise_long(tok[2:].partition("=")[0]).partition(".")[0].removeprefix("no-")
        else:
            resolved, _ = resolve_short(tok[1:])
            if resolved is None:
                continue
            name = resolved.partition(".")[0]
        if name in KNOWN_NAMES and name not in GENERIC_FLAGS:
            return True
    return False


def _unwrap_python(argv: list[str], st: Launch) -> tuple[Mode, list[str]] | None:
    """``python [options] -m MODULE …`` or ``python [options] SCRIPT serve …``: the vLLM part, or None."""
    i = 1
    while i < len(argv):
        tok = argv[i]
        if tok == "-m" or (tok.startswith("-m") and len(tok) > 2):
            module = argv[i + 1] if tok == "-m" and i + 1 < len(argv) else tok[2:]
            rest = argv[i + 2 :] if tok == "-m" else argv[i + 1 :]
            if module == API_SERVER_MODULE:
                st.entry = "module"
                return "module", rest
            if module in ("vllm.entrypoints.cli.main", "vllm") and rest[:1] == ["serve"]:
                st.entry = "vllm"
                return "serve", rest[1:]
            if rest[:1] == ["serve"] and _vllm_like(rest[1:]):
                st.entry = "serve-subcommand"
                st.launcher.extend(argv[: len(argv) - len(rest)])
                return "serve", rest[1:]
            return None
        if tok in ("-X", "-W", "-c"):
            if tok == "-c":
                return None
            i += 2
            continue
        if tok.startswith("-"):
            i += 1
            continue
        # The console script: /opt/vllm/venv/bin/python3 /opt/vllm/venv/bin/vllm serve …
        if program_name(tok) == "vllm" and argv[i + 1 : i + 2] == ["serve"]:
            st.entry = "vllm"
            return "serve", argv[i + 2 :]
        # A launcher script of any name: python /opt/serve_model.py serve /models/x --tensor-parallel-size 8
        if argv[i + 1 : i + 2] == ["serve"] and _vllm_like(argv[i + 2 :]):
            st.entry = "serve-subcommand"
            st.launcher.extend(argv[: i + 1])
            return "serve", argv[i + 2 :]
        return None
    return None


def _unwrap_shell(script: str, st: Launch, depth: int) -> tuple[Mode, list[str]] | None:
    """The first simple command of ``script`` that starts vLLM."""
    for command in shell_script.simple_commands(script):
        found = _unwrap(command, st, depth + 1)
        if found is None:
            continue
        variables = shell_script.variables(found[1])
        if variables:
            st.notes.append(
                "The shell script uses variables (" + ", ".join(variables) + ") that only the shell knows at "
                "run time; they are shown as written."
            )
        return found
    return None


def _unwrap_docker(run: DockerRun, st: Launch, depth: int) -> tuple[Mode, list[str]] | None:
    """The vLLM part of a container: its entrypoint, the command after the image, or the image's own."""
    st.saw_docker = True
    st.docker_env.update(run.env)
    st.docker_env_files.extend(run.env_files)
    if run.host_env:
        st.notes.append("Docker copies " + ", ".join(run.host_env) + " from the host's environment (not shown).")
    if run.image is None:
        st.notes.append("No image found in the docker command.")
        return None
    image, rest = run.image, run.command
    st.docker_image = image
    if run.entrypoint is not None:
        found = _unwrap([run.entrypoint, *rest], st, depth + 1)
        if found is None:
            st.notes.append(f"The container's entrypoint is `{run.entrypoint}`, not vLLM.")
        return found
    if rest and not looks_like_flag(rest[0]):
        found = _unwrap(rest, st, depth + 1)
        if found is not None:
            if "vllm-openai" in image:
                st.notes.append(
                    f"The image {image} already runs `vllm serve`; repeating the command after the image "
                    "makes vLLM read it as arguments. Drop it or set `--entrypoint`."
                )
            return found
    if "vllm" not in image:
        st.notes.append(f"Assumed the image {image} starts `vllm serve` like vllm/vllm-openai does.")
    return "serve", rest
