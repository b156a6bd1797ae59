"""Unwrap and normalise a vLLM server command line the way vLLM's own argument parser reads it.

Input is a full argv (``/proc/PID/cmdline`` or a unit's ExecStart): ``vllm serve``, a console script run
by its interpreter, ``python -m vllm.entrypoints.openai.api_server``, ``bash -c '… exec vllm serve …'``
or ``docker run … IMAGE …``. Output is a ``VllmCommand`` with flags keyed by their long name.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Literal

from services.models import FlagValue, VllmCommand
from services.redact import is_secret_name

Mode = Literal["serve", "module"]
Entry = Literal["vllm", "module", "serve-subcommand"]

SHORT_ALIASES: dict[str, str] = {
    "tp": "tensor-parallel-size",
    "pp": "pipeline-parallel-size",
    "dp": "data-parallel-size",
    "dcp": "decode-context-parallel-size",
    "pcp": "prefill-context-parallel-size",
    "dpn": "data-parallel-rank",
    "dpr": "data-parallel-start-rank",
    "dpl": "data-parallel-size-local",
    "dpa": "data-parallel-address",
    "dpp": "data-parallel-rpc-port",
    "dpb": "data-parallel-backend",
    "dph": "data-parallel-hybrid-lb",
    "dpe": "data-parallel-external-lb",
    "ep": "enable-expert-parallel",
    "n": "nnodes",
    "r": "node-rank",
    "q": "quantization",
    "sc": "speculative-config",
    "cc": "compilation-config",
    "ac": "attention-config",
    "asc": "api-server-count",
}

# Flags that take no value (store_true or BooleanOptionalAction): a following word is NOT their value,
# which matters for `vllm serve --enforce-eager /models/x` where the word is the model.
KNOWN_SWITCHES = frozenset({
    "trust-remote-code", "enable-prefix-caching", "enforce-eager", "enable-auto-tool-choice",
    "enable-expert-parallel", "disable-log-stats", "disable-log-requests", "headless",
    "enable-chunked-prefill", "async-scheduling", "enable-log-requests", "enable-log-outputs",
    "disable-custom-all-reduce", "enable-lora", "disable-uvicorn-access-log", "enable-server-load-tracking",
    "enable-force-include-usage", "language-model-only", "enable-eplb", "kv-cache-metrics",
    "cudagraph-metrics", "enable-mfu-metrics", "aggregate-engine-logging", "grpc",
    "data-parallel-hybrid-lb", "data-parallel-external-lb", "allow-deprecated-quantization",
    "enable-sleep-mode", "enable-prompt-tokens-details", "enable-request-id-headers",
    "disable-fastapi-docs", "enable-tokenizer-info-endpoint", "disable-frontend-multiprocessing",
    "fully-sharded-loras", "skip-tokenizer-init", "enable-prompt-embeds", "enable-dbo",
    "disable-sliding-window", "disable-cascade-attn", "enable-ssl-refresh", "return-tokens-as-token-ids",
    "enable-log-deltas", "fail-on-environ-validation", "allow-credentials", "calculate-kv-scales",
    "disable-chunked-mm-input", "disable-hybrid-kv-cache-manager", "disable-nccl-for-dp-synchronization",
    "enable-mm-embeds", "exclude-tools-when-tool-choice-none", "interleave-mm-strings", "kv-sharing-fast-prefill",
    "log-error-stack", "ray-workers-use-nsight", "skip-mm-profiling", "tokens-only", "trust-request-chat-template",
    "use-tqdm-on-load",
})  # fmt: skip

# nargs="+" flags: every following non-flag word belongs to them (--middleware is "append" in vLLM, read greedily
# here so that a credential-bearing URL after it is still redacted). services/change/vllm_flags.toml agrees
# (tests/unit/services/change/test_flag_tables_agree.py).
MULTI_VALUE_FLAGS = frozenset({
    "api-key", "served-model-name", "middleware", "lora-modules", "cudagraph-capture-sizes", "allowed-media-domains",
    "ignore-patterns", "logits-processors",
})  # fmt: skip
# nargs="?": bare means True ("use the cached login"), with a word means that string.
OPTIONAL_VALUE_FLAGS = frozenset({"hf-token"})
SECRET_FLAGS = ("api-key", "hf-token")  # a tuple: secret_values() returns them in this order

FLAG_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("model", (
        "tokenizer", "tokenizer-mode", "revision", "tokenizer-revision", "code-revision", "served-model-name",
        "trust-remote-code", "dtype", "max-model-len", "quantization", "quantization-config", "load-format",
        "download-dir", "hf-config-path", "hf-overrides", "generation-config", "override-generation-config",
        "seed", "language-model-only", "hf-token", "model-impl", "config-format", "skip-tokenizer-init",
        "allow-deprecated-quantization",
    )),
    ("parallelism", (
        "tensor-parallel-size", "pipeline-parallel-size", "data-parallel-*", "enable-expert-parallel",
        "distributed-executor-backend", "nnodes", "node-rank", "headless", "api-server-count",
        "disable-custom-all-reduce", "enable-eplb", "eplb-config", "all2all-backend",
        "*-context-parallel-size", "master-addr", "master-port",
    )),
    ("memory & capacity", (
        "gpu-memory-utilization", "max-num-seqs", "max-num-batched-tokens", "kv-cache-dtype", "block-size",
        "kv-cache-memory-bytes", "num-gpu-blocks-override", "enable-prefix-caching",
        "prefix-caching-hash-algo", "enable-chunked-prefill", "cpu-offload-gb", "kv-offloading-*",
        "swap-space",
    )),
    ("features/parsers", (
        "tool-call-parser", "reasoning-parser", "enable-auto-tool-choice", "chat-template*",
        "default-chat-template-kwargs", "enable-lora", "max-loras", "max-lora-rank", "lora-modules",
        "speculative-config", "spec-*", "tool-parser-plugin",
    )),
    ("serving", (
        "host", "port", "uds", "api-key", "ssl-*", "root-path", "uvicorn-log-level",
        "disable-uvicorn-access-log", "disable-access-log-for-endpoints", "disable-log-stats",
        "enable-log-requests", "enable-log-outputs", "disable-log-requests", "max-log-len",
        "shutdown-timeout",
        "enable-server-load-tracking", "enable-force-include-usage", "allowed-origins", "allowed-methods",
        "allowed-headers", "middleware", "otlp-traces-endpoint", "collect-detailed-traces",
    )),
    ("compilation", (
        "optimization-level", "compilation-config", "cudagraph-capture-sizes", "max-cudagraph-capture-size",
        "enforce-eager", "performance-mode", "attention-config", "attention-backend",
    )),
)  # fmt: skip
_OTHER_GROUP = "other"

# Long names this module knows; used for argparse-style prefix matching (`--max-model` → max-model-len).
_KNOWN_NAMES = frozenset(
    {p for _, pats in FLAG_GROUPS for p in pats if "*" not in p}
    | KNOWN_SWITCHES
    | MULTI_VALUE_FLAGS
    | set(SHORT_ALIASES.values())
    | {"model", "config", "optimization-level"}
)

REMOVED_FLAGS: dict[str, str] = {
    "swap-space": (
        "`--swap-space` was removed from vLLM (#36216, March 2026): current vLLM stops with "
        '"unrecognized arguments". Delete it from the command line.'
    ),
    "disable-log-requests": (
        "`--disable-log-requests` was removed from vLLM (#35723, March 2026): current vLLM stops with "
        '"unrecognized arguments". Delete it: requests are only logged with `--enable-log-requests`.'
    ),
}
_ATTENTION_FIX = 'use `--attention-backend NAME` (or `-ac \'{"backend": "NAME"}\'`) instead'
REMOVED_ENV: dict[str, str] = {
    "VLLM_USE_V1": (
        "`VLLM_USE_V1` was removed in November 2025 (V1 is the only engine now): vLLM ignores it and logs "
        '"Unknown vLLM environment variable". Delete it.'
    ),
    "VLLM_ATTENTION_BACKEND": (
        f"`VLLM_ATTENTION_BACKEND` was removed in January 2026 and is ignored; {_ATTENTION_FIX}."
    ),
    "VLLM_FLASH_ATTN_VERSION": (
        f"`VLLM_FLASH_ATTN_VERSION` was removed in January 2026 and is ignored; {_ATTENTION_FIX}."
    ),
    "VLLM_USE_TRTLLM_ATTENTION": (
        f"`VLLM_USE_TRTLLM_ATTENTION` was removed in January 2026 and is ignored; {_ATTENTION_FIX}."
    ),
    "VLLM_DISABLE_FLASHINFER_PREFILL": (
        f"`VLLM_DISABLE_FLASHINFER_PREFILL` was removed in January 2026 and is ignored; {_ATTENTION_FIX}."
    ),
    "VLLM_USE_CUDNN_PREFILL": (
        f"`VLLM_USE_CUDNN_PREFILL` was removed in January 2026 and is ignored; {_ATTENTION_FIX}."
    ),
}
MODEL_FLAG_DEPRECATED = (
    "`--model` with `vllm serve` is deprecated and will be removed: put the model right after `vllm serve` "
    "(`vllm serve MODEL …`)."
)

# argparse treats these as values, not options (its _negative_number_matcher).
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
_ENV_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^/\s:@'\"]+:(?P<pw>[^@\s/'\"]+)@")
_SHELL_VAR = re.compile(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?")
_SHELLS = frozenset({"bash", "sh", "dash", "zsh", "ksh"})
_CONTAINER_TOOLS = frozenset({"docker", "podman", "nvidia-docker"})
_API_SERVER_MODULE = "vllm.entrypoints.openai.api_server"

_DOCKER_SHORT_VALUE = {
    "a": "attach", "c": "cpu-shares", "e": "env", "h": "hostname", "l": "label", "m": "memory",
    "p": "publish", "u": "user", "v": "volume", "w": "workdir",
}  # fmt: skip
_DOCKER_BOOL_LONG = frozenset({
    "rm", "detach", "interactive", "tty", "privileged", "init", "read-only", "publish-all", "no-healthcheck",
    "oom-kill-disable", "quiet", "sig-proxy", "disable-content-trust", "help", "env-host", "http-proxy",
    "replace", "rmi", "no-hosts", "tls-verify", "use-api-version",
})  # fmt: skip
# Not exhaustive: an unknown long docker option is assumed to take a value, which is true for nearly all.
_DOCKER_VALUE_LONG = frozenset({
    "attach", "add-host", "annotation", "blkio-weight", "blkio-weight-device", "cap-add", "cap-drop",
    "cgroup-parent", "cgroupns", "cidfile", "cpu-period", "cpu-quota", "cpu-rt-period", "cpu-rt-runtime",
    "cpu-shares", "cpus", "cpuset-cpus", "cpuset-mems", "detach-keys", "device", "device-cgroup-rule",
    "device-read-bps", "device-read-iops", "device-write-bps", "device-write-iops", "dns", "dns-option",
    "dns-search", "domainname", "entrypoint", "env", "env-file", "expose", "gpus", "group-add", "health-cmd",
    "health-interval", "health-retries", "health-start-period", "health-start-interval", "health-timeout",
    "hostname", "ip", "ip6", "ipc", "isolation", "kernel-memory", "label", "label-file", "link",
    "link-local-ip", "log-driver", "log-opt", "mac-address", "memory", "memory-reservation", "memory-swap",
    "memory-swappiness", "mount", "name", "network", "net", "network-alias", "net-alias", "oom-score-adj",
    "pid", "pids-limit", "platform", "publish", "pull", "restart", "runtime", "security-opt", "shm-size",
    "stop-signal", "stop-timeout", "storage-opt", "sysctl", "tmpfs", "ulimit", "user", "userns", "uts",
    "volume", "volume-driver", "volumes-from", "workdir", "pod", "hooks-dir", "secret",
})  # fmt: skip


@dataclass
class _State:
    saw_docker: bool = False
    saw_shell: bool = False
    docker_image: str | None = None
    docker_env: dict[str, str] = field(default_factory=dict)
    docker_env_files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    launcher: list[str] = field(default_factory=list)  # wrapper words in front of the vLLM program
    entry: Entry | None = None
    pending_script: str | None = None  # `su -c SCRIPT`, `runuser -c SCRIPT`


def _base(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _looks_like_flag(tok: str) -> bool:
    # Mirrors argparse: "-" alone, negative numbers and words with spaces are values, except that
    # `--flag={"a": 1}` is still an option because the part before "=" names one.
    if not tok.startswith("-") or tok == "-" or _NEGATIVE_NUMBER.match(tok):
        return False
    return " " not in tok or "=" in tok.split(" ", 1)[0]


def _normalise_long(name: str) -> str:
    # vLLM swaps underscores for dashes only before the first "." (dotted JSON keys keep theirs).
    base, dot, rest = name.partition(".")
    return base.replace("_", "-") + dot + rest


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
        if _ENV_ASSIGN.match(tok):
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


def _skip_launchers(argv: list[str], st: _State | None = None) -> list[str]:
    """Drop ``exec``, ``env [-i] [-u N] NAME=V …``, shell ``NAME=V`` prefixes and wrappers (``sudo -u X``,
    ``numactl …``, ``uv run``…) in front of a command; the words dropped are kept in ``st.launcher``."""
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok == "exec" or _ENV_ASSIGN.match(tok):
            i += 1
        elif _base(tok) == "env":
            i += 1
            while i < len(argv) and (argv[i].startswith("-") or _ENV_ASSIGN.match(argv[i])):
                i += 2 if argv[i] in ("-u", "--unset", "-C", "--chdir", "-S") else 1
        elif _base(tok) in _WRAPPERS and st is not None:
            found = _skip_wrapper(argv[i:], _WRAPPERS[_base(tok)])
            if found is None:
                break
            rest, script = found
            if script is not None:
                st.launcher.extend(a for a in argv[i:] if a != script)
                st.pending_script = script
                return []
            st.launcher.extend(argv[i : len(argv) - len(rest)])
            argv, i = rest, 0
        else:
            break
    return argv[i:]


def _unwrap(argv: list[str], st: _State, depth: int = 0) -> tuple[Mode, list[str]] | None:
    """Find the vLLM part of ``argv``: (parser mode, the arguments vLLM's parser sees) or None."""
    if depth > 4:
        return None
    argv = _skip_launchers(argv, st)
    if st.pending_script is not None:
        pending, st.pending_script = st.pending_script, None
        st.saw_shell = True
        return _unwrap_shell(pending, st, depth)
    if not argv:
        return None
    head = _base(argv[0])
    if head in _CONTAINER_TOOLS:
        if argv[1:2] == ["run"]:
            return _unwrap_docker(argv, 2, st, depth)
        if argv[1:3] == ["container", "run"]:
            return _unwrap_docker(argv, 3, st, depth)
    if head in _SHELLS:
        script = _shell_script(argv)
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
    # Launchers we do not model: look for the vLLM part inside.
    for i in range(1, len(argv) - 1):
        if _base(argv[i]) == "vllm" and argv[i + 1] == "serve":
            st.notes.append(f"Started through `{argv[0]}`; read the vLLM arguments after `vllm serve`.")
            st.entry = "vllm"
            st.launcher.extend(argv[:i])
            return "serve", argv[i + 2 :]
        if argv[i] == "-m" and argv[i + 1] == _API_SERVER_MODULE:
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


# Flags that any web server may have: they alone do not make a `serve` subcommand vLLM's.
_GENERIC_FLAGS = frozenset({
    "host", "port", "uds", "api-key", "root-path", "config", "seed", "middleware", "allowed-origins",
    "allowed-methods", "allowed-headers", "model", "revision", "dtype", "download-dir", "uvicorn-log-level",
    "headless", "nnodes", "node-rank", "quantization",
})  # fmt: skip


def _vllm_like(args: list[str]) -> bool:
    """True when ``args`` (after a ``serve`` word) carry at least one flag only vLLM has."""
    for tok in args:
        if not _looks_like_flag(tok):
            continue
        if tok.startswith("--"):
            name = _normalise_long(tok[2:].partition("=")[0]).partition(".")[0].removeprefix("no-")
        else:
            resolved, _ = _resolve_short(tok[1:])
            if resolved is None:
                continue
            name = resolved.partition(".")[0]
        if name in _KNOWN_NAMES and name not in _GENERIC_FLAGS:
            return True
    return False


def _unwrap_python(argv: list[str], st: _State) -> tuple[Mode, list[str]] | None:
    i = 1
    while i < len(argv):
        tok = argv[i]
        if tok == "-m" or (tok.startswith("-m") and len(tok) > 2):
            module = argv[i + 1] if tok == "-m" and i + 1 < len(argv) else tok[2:]
            rest = argv[i + 2 :] if tok == "-m" else argv[i + 1 :]
            if module == _API_SERVER_MODULE:
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
        if _base(tok) == "vllm" and argv[i + 1 : i + 2] == ["serve"]:
            st.entry = "vllm"
            return "serve", argv[i + 2 :]
        # A launcher script of any name: python /opt/serve_model.py serve /models/x --tensor-parallel-size 8
        if argv[i + 1 : i + 2] == ["serve"] and _vllm_like(argv[i + 2 :]):
            st.entry = "serve-subcommand"
            st.launcher.extend(argv[: i + 1])
            return "serve", argv[i + 2 :]
        return None
    return None


def _shell_script(argv: list[str]) -> str | None:
    """The script of ``bash [-l] -c 'script'`` / ``sh -ec '…'``, or None when there is no ``-c``."""
    has_c = False
    i = 1
    while i < len(argv):
        tok = argv[i]
        if tok in ("-o", "+o", "-O", "+O"):
            i += 2
            continue
        if tok.startswith("--"):
            i += 1
            continue
        if tok.startswith(("-", "+")) and len(tok) > 1:
            has_c = has_c or (tok[0] == "-" and "c" in tok[1:])
            i += 1
            continue
        return tok if has_c else None
    return None


def _shell_commands(script: str) -> list[list[str]]:
    """Split a shell script into simple commands (at ``;`` ``&&`` ``||`` ``|`` ``&`` newlines)."""
    script = script.replace("\\\n", " ")
    # fd redirections like 2>&1 would leave a stray "2" argument behind; drop the fd number first.
    script = re.sub(r"(?<=\s)\d+(?=[<>])", "", script)
    lex = shlex.shlex(script, posix=True, punctuation_chars=";&|()<>\n")
    lex.whitespace = " \t\r"
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        tokens = list(lex)
    except ValueError:
        tokens = script.split()
    commands: list[list[str]] = [[]]
    skip_next = False
    for tok in tokens:
        if skip_next:
            skip_next = False
            continue
        if tok and all(c in "<>&" for c in tok) and any(c in "<>" for c in tok):
            skip_next = True  # redirection target
            continue
        if tok and all(c in ";&|()\n" for c in tok):
            commands.append([])
            continue
        commands[-1].append(tok)
    return [c for c in commands if c]


def _unwrap_shell(script: str, st: _State, depth: int) -> tuple[Mode, list[str]] | None:
    for command in _shell_commands(script):
        found = _unwrap(command, st, depth + 1)
        if found is None:
            continue
        variables = sorted({m for tok in found[1] for m in _SHELL_VAR.findall(tok)})
        if variables:
            st.notes.append(
                "The shell script uses variables (" + ", ".join(variables) + ") that only the shell knows at "
                "run time; they are shown as written."
            )
        return found
    return None


def _unwrap_docker(argv: list[str], start: int, st: _State, depth: int) -> tuple[Mode, list[str]] | None:
    st.saw_docker = True
    entrypoint: str | None = None
    host_env: list[str] = []

    def take(name: str, value: str) -> None:
        nonlocal entrypoint
        if name == "env":
            key, eq, val = value.partition("=")
            st.docker_env[key] = val
            if not eq:
                host_env.append(key)
        elif name == "env-file":
            st.docker_env_files.append(value)
        elif name == "entrypoint":
            entrypoint = value

    i = start
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            i += 1
            break
        if tok.startswith("--"):
            name, eq, value = tok[2:].partition("=")
            if name in _DOCKER_BOOL_LONG or eq:
                i += 1
            else:
                value = argv[i + 1] if i + 1 < len(argv) else ""
                i += 2
            if name not in _DOCKER_BOOL_LONG:
                take(name, value)
            continue
        if tok.startswith("-") and len(tok) > 1:
            # A cluster like -it, -d, or a short option with its value glued on: -p8000:8000, -e=A=1.
            for j in range(1, len(tok)):
                long_name = _DOCKER_SHORT_VALUE.get(tok[j])
                if long_name is None:
                    continue
                glued = tok[j + 1 :]
                glued = glued[1:] if glued.startswith("=") else glued
                if glued:
                    take(long_name, glued)
                    i += 1
                else:
                    take(long_name, argv[i + 1] if i + 1 < len(argv) else "")
                    i += 2
                break
            else:
                i += 1
            continue
        break
    if host_env:
        st.notes.append("Docker copies " + ", ".join(host_env) + " from the host's environment (not shown).")
    if i >= len(argv):
        st.notes.append("No image found in the docker command.")
        return None
    image = argv[i]
    st.docker_image = image
    rest = argv[i + 1 :]
    if entrypoint is not None:
        found = _unwrap([entrypoint, *rest], st, depth + 1)
        if found is None:
            st.notes.append(f"The container's entrypoint is `{entrypoint}`, not vLLM.")
        return found
    if rest and not _looks_like_flag(rest[0]):
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


def _config_flags(
    config_yaml: Mapping[str, object], notes: list[str]
) -> tuple[dict[str, FlagValue], str | None]:
    """Convert a ``--config`` YAML mapping the way vLLM does; returns (flags, model from the file)."""
    flags: dict[str, FlagValue] = {}
    model: str | None = None
    for raw_key, value in config_yaml.items():
        key = _normalise_long(str(raw_key))
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


def _resolve_short(body: str) -> tuple[str | None, str | None]:
    """(long name, explicit value) for a single-dash option body (``tp=8``, ``sc.method``, ``O3``)."""
    if body == "O":
        return "optimization-level", None
    if body.startswith("O") and re.fullmatch(r"=?\d+", body[1:]):
        return "optimization-level", body[1:].lstrip("=")
    name_part, eq, value = body.partition("=")
    base, dot, rest = name_part.partition(".")
    alias = SHORT_ALIASES.get(base)
    if alias is None:
        return None, None
    return alias + dot + rest, (value if eq else None)


def _prefix_match(name: str) -> str | None:
    base, dot, rest = name.partition(".")
    if base in _KNOWN_NAMES:
        return None
    candidates = [k for k in _KNOWN_NAMES if k.startswith(base)]
    if len(candidates) == 1:
        return candidates[0] + dot + rest
    return None


def parse_vllm_argv(argv: list[str], config_yaml: Mapping[str, object] | None = None) -> VllmCommand:
    """Unwrap and normalise a full vLLM server argv into a ``VllmCommand``.

    ``config_yaml`` is the already-loaded mapping of the ``--config FILE`` the command names; its values
    come first and the command line wins, as in vLLM. Values are kept as strings exactly as written;
    switches are True, ``--no-X`` is False, nargs="+" flags are lists. Secret values are kept too: redact
    before rendering (``secret_values`` lists them).
    """
    st = _State()
    found = _unwrap(list(argv), st)
    if found is None:
        return VllmCommand(wrapper="unknown", notes=[*st.notes, "No `vllm serve` or vLLM api_server found."])
    mode, args = found
    wrapper: Literal["vllm-serve", "api-server-module", "bash", "docker"]
    if st.saw_docker:
        wrapper = "docker"
    elif st.saw_shell:
        wrapper = "bash"
    else:
        wrapper = "vllm-serve" if mode == "serve" else "api-server-module"

    notes = st.notes
    flags: dict[str, FlagValue] = {}
    positionals: list[str] = []
    unknown: list[str] = []
    model_flag: str | None = None
    config_file: str | None = None

    # Only the two-word `--config PATH` is loaded by vLLM; pull it out first so the merge order is right.
    cli: list[str] = []
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
    config_model: str | None = None
    if config_loaded and config_yaml is not None:
        cfg_flags, config_model = _config_flags(config_yaml, notes)
        flags.update(cfg_flags)
    elif config_loaded:
        notes.append(f"Settings from the config file {config_file} are not included (file not read).")

    i = 0
    while i < len(cli):
        tok = cli[i]
        i += 1
        if tok == "--":
            positionals.extend(cli[i:])
            break
        if not _looks_like_flag(tok):
            positionals.append(tok)
            continue
        explicit: str | None
        if tok.startswith("--"):
            raw_name, eq, value = tok[2:].partition("=")
            name = _normalise_long(raw_name)
            explicit = value if eq else None
            if not name.startswith("no-"):
                matched = _prefix_match(name)
                if matched is not None:
                    notes.append(f"`--{raw_name}` is read as `--{matched}` (argparse takes unique prefixes).")
                    name = matched
        else:
            resolved, explicit = _resolve_short(tok[1:])
            if resolved is None:
                unknown.append(tok)
                continue
            name = resolved

        if name == "model":
            if explicit is None and i < len(cli) and not _looks_like_flag(cli[i]):
                explicit = cli[i]
                i += 1
            model_flag = explicit
            continue
        if explicit is not None:
            flags[name] = [explicit] if name in MULTI_VALUE_FLAGS else explicit
        elif name.startswith("no-") and "." not in name:
            flags[name[3:]] = False
        elif name in KNOWN_SWITCHES:
            flags[name] = True
        elif name in MULTI_VALUE_FLAGS:
            values: list[str] = []
            while i < len(cli) and not _looks_like_flag(cli[i]):
                values.append(cli[i])
                i += 1
            flags[name] = values
        elif i < len(cli) and not _looks_like_flag(cli[i]):
            flags[name] = cli[i]
            i += 1
        else:
            flags[name] = True

    model: str | None = None
    source: Literal["positional", "flag", "config"] | None = None
    if mode == "serve":
        if positionals:
            model, source = positionals[0], "positional"
            positionals = positionals[1:]
        elif model_flag is not None:
            model, source = model_flag, "flag"
        elif config_model is not None:
            model, source = config_model, "config"
        if model_flag is not None:
            notes.append(MODEL_FLAG_DEPRECATED)
    else:
        if positionals:
            notes.append(
                f"`{positionals[0]}` is ignored by `python -m {_API_SERVER_MODULE}`: only `--model` selects "
                "the model there."
            )
            positionals = positionals[1:]
        if model_flag is not None:
            model, source = model_flag, "flag"
        elif config_model is not None:
            model, source = config_model, "config"
    if model is None:
        notes.append("No model on the command line: vLLM would serve its default model Qwen/Qwen3-0.6B.")
    if positionals:
        unknown.extend(positionals)
        notes.append('Words vLLM does not accept ("unrecognized arguments"): ' + " ".join(positionals))

    return VllmCommand(
        wrapper=wrapper,
        model=model,
        model_source=source,
        flags=flags,
        config_file=config_file,
        docker_image=st.docker_image,
        docker_env=st.docker_env,
        docker_env_files=st.docker_env_files,
        unknown_flags=unknown,
        notes=notes,
        launcher=st.launcher,
        entry=st.entry,
    )


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
    return any(_base(w) in _WRAPPERS or _base(w) == "env" for w in cmd.launcher) or cmd.entry != "serve-subcommand"


def format_flag_value(value: object, missing: str = "(not set)") -> str:
    """A flag value for people: switches as true/false, lists space-separated, ``missing`` for None."""
    if value is None:
        return missing
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return " ".join(str(x) for x in value)
    return str(value)


# FLAG_GROUPS split into the names matched as they are and the few patterns with a wildcard: fnmatchcase
# compiles a regular expression for every pattern it is given, plain names too, so a cold `inferbot ask`
# would compile one for every plain name to group one service's flags.
_GROUP_MATCHERS: tuple[tuple[str, frozenset[str], tuple[str, ...]], ...] = tuple(
    (group, frozenset(p for p in patterns if not any(c in p for c in "*?[")),
     tuple(p for p in patterns if any(c in p for c in "*?[")))
    for group, patterns in FLAG_GROUPS
)


@functools.lru_cache(maxsize=1024)
def flag_group(name: str) -> str:
    """The display group of a flag; dotted names (``speculative-config.method``) go with their base flag."""
    base = name.split(".", 1)[0]
    for group, names, wildcards in _GROUP_MATCHERS:
        if base in names or any(fnmatchcase(base, p) for p in wildcards):
            return group
    return _OTHER_GROUP


def group_flags(flags: Mapping[str, FlagValue]) -> list[tuple[str, list[tuple[str, FlagValue]]]]:
    """Flags grouped for display, groups in ``FLAG_GROUPS`` order then "other"; empty groups omitted."""
    buckets: dict[str, list[tuple[str, FlagValue]]] = {g: [] for g, _ in FLAG_GROUPS}
    buckets[_OTHER_GROUP] = []
    for name, value in flags.items():
        buckets[flag_group(name)].append((name, value))
    return [(g, items) for g, items in buckets.items() if items]


def removed_flag_warnings(
    flags: Mapping[str, FlagValue], *, model_flag_with_serve: bool = False
) -> list[str]:
    """Friendly warnings for flags current vLLM rejects or that stop it from starting."""
    warnings = [msg for name, msg in REMOVED_FLAGS.items() if name in flags]
    if model_flag_with_serve:
        warnings.append(MODEL_FLAG_DEPRECATED)
    if flags.get("enable-auto-tool-choice") is True and not flags.get("tool-call-parser"):
        warnings.append(
            "`--enable-auto-tool-choice` needs `--tool-call-parser NAME` (e.g. hermes, kimi_k2): without it "
            "vLLM refuses to start."
        )
    return warnings


def removed_env_warnings(env: Mapping[str, str]) -> list[str]:
    """Friendly warnings for vLLM environment variables that were removed and are now ignored."""
    return [msg for name, msg in REMOVED_ENV.items() if name in env]
