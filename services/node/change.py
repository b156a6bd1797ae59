"""The remote side of a settings change: fixed command templates, filled only with validated config values.

* ``read_unit``: one fixed script — ``systemctl cat`` of the unit, inferbot's drop-in as it is on disk, the unit's
  ``EnvironmentFile=``s (read as the probe reads them, ``sudo -n base64`` for root-only ones), the GPUs
  (``nvidia-smi``) and the listening TCP sockets (``/proc/net/tcp{,6}``, read-only, no process names);
* ``parse_on_node``: the node's own vLLM parses the whole new command line without loading a model, run with the
  unit's interpreter. The program path and the argv travel on **stdin**; the template is constant, and checks the
  program path's shape on the node before it runs anything;
* ``write_dropin``: ``sudo -n install -D -m 0644 /dev/stdin PATH.new`` with the content on stdin, then
  ``sudo -n mv -f -- PATH.new PATH`` (atomic), then the file is read back and compared byte for byte;
* ``remove_dropin`` (``sudo -n rm -f -- PATH``), ``daemon_reload`` (``[access] reload_command``) and
  ``reset_failed`` (``sudo -n systemctl reset-failed -- UNIT``).

Paths come only from ``Service.dropin_path()`` (config-validated) and unit names from ``UNIT_RE``; both are checked
again here and shell-quoted. The operator's unit and drop-ins are never written.
"""

from __future__ import annotations

import base64
import binascii
import json
import shlex

from pydantic import BaseModel, ConfigDict, Field

from config.models import PATH_RE, UNIT_RE, AccessPolicy, Node, Service
from services.models import Model, NodeError
from services.node.ssh import NodePool, NodeUnreachable
from services.redact import redact_patterns


class UnitSource(BaseModel):
    """What the node said about the unit: ``systemctl cat`` (fragment and drop-ins with their paths), the
    ``EnvironmentFile=``s (None: unreadable or missing) and inferbot's drop-in as it is on disk (None: absent)."""

    model_config = ConfigDict(extra="forbid")
    unit: str
    cat: str
    dropin_path: str
    dropin_text: str | None = None
    env_files: dict[str, str | None] = Field(default_factory=dict)


READ_LIMIT_S = 30.0
PARSE_LIMIT_S = 240.0  # importing vLLM (torch) takes a while on a busy node
WRITE_LIMIT_S = 30.0
PARSE_MARK = "@@inferbot-parse@@ "

_READ_SCRIPT = r"""set -u
u=$1; d=$2
b() { base64 -w0; }
out=$(systemctl cat -- "$u" 2>/dev/null); printf 'cat %s ' "$?"; printf '%s' "$out" | b; echo
if [ -e "$d" ]; then printf 'dropin 0 '; base64 -w0 -- "$d" || printf '!'; echo; else echo 'dropin 1 '; fi
systemctl show -p EnvironmentFiles --value -- "$u" 2>/dev/null | while IFS= read -r line; do
  f=${line% (ignore_errors=*)}
  case $f in /*) ;; *) continue;; esac
  if [ -r "$f" ]; then data=$(base64 -w0 -- "$f" 2>/dev/null); rc=$?
  else data=$(sudo -n base64 -w0 -- "$f" 2>/dev/null); rc=$?; fi
  printf 'envfile %s %s %s\n' "$rc" "$(printf '%s' "$f" | b)" "$data"
done
g=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null); printf 'gpus %s ' "$?"; printf '%s' "$g" | b; echo
printf 'tcp 0 '; cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | b; echo
"""

# The parser check. Its only input is stdin: line 1 the program the unit starts, then JSON {"argv": [...]}.
_PARSE_PY = r"""
import contextlib, io, json, sys
req = json.loads(sys.stdin.read())
out = {"loaded": False, "ok": False, "version": None, "error": None}
try:
    import vllm
    out["version"] = getattr(vllm, "__version__", None)
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError:
        from vllm.utils import FlexibleArgumentParser
    from vllm.entrypoints.openai.cli_args import make_arg_parser, validate_parsed_serve_args
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    out["loaded"] = True
except BaseException as e:
    out["error"] = type(e).__name__ + ": " + str(e)[:400]
if out["loaded"]:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(req["argv"])
            validate_parsed_serve_args(args)
        out["ok"] = True
    except SystemExit:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        out["error"] = lines[-1] if lines else "the parser refused the command line"
    except BaseException as e:
        out["error"] = type(e).__name__ + ": " + str(e)[:400]
print("@@inferbot-parse@@ " + json.dumps(out))
"""
assert "'" not in _PARSE_PY  # it is single-quoted in the shell template below

_PARSE_SCRIPT = r"""set -u
IFS= read -r prog || exit 90
case $prog in
  /*) ;;
  *) for dir in /usr/local/sbin /usr/local/bin /usr/sbin /usr/bin /sbin /bin; do
       if [ -x "$dir/$prog" ]; then prog=$dir/$prog; break; fi
     done;;
esac
shape() { case $1 in /*) ;; *) return 1;; esac; case $1 in *[!A-Za-z0-9._/+@-]*|*/../*) return 1;; esac; }
shape "$prog" || { echo "inferbot: the program path has an unexpected shape" >&2; exit 92; }
[ -x "$prog" ] || { echo "inferbot: $prog is not an executable file" >&2; exit 93; }
case ${prog##*/} in
  python|python[0-9]|python[0-9].[0-9]|python[0-9].[0-9][0-9]) py=$prog;;
  *) IFS= read -r first < "$prog" || { echo "inferbot: cannot read $prog" >&2; exit 94; }
     case $first in
       '#!'/*) py=${first#??}; py=${py%% *};;
       *) echo "inferbot: $prog does not start with #!" >&2; exit 94;;
     esac;;
esac
shape "$py" || { echo "inferbot: the interpreter path has an unexpected shape" >&2; exit 92; }
[ -x "$py" ] || { echo "inferbot: the interpreter $py is not executable" >&2; exit 93; }
echo "@@inferbot-python@@ $py"
VLLM_CONFIGURE_LOGGING=0 exec "$py" -c '""" + _PARSE_PY + """'
"""


class UnitRead(Model):
    """What ``read_unit`` found: the unit (for the plan), the node's GPUs and listening ports."""

    source: UnitSource
    cat_ok: bool
    gpu_count: int | None = None  # None: nvidia-smi did not answer
    listening: list[int] = Field(default_factory=list)  # TCP ports something listens on (any address)


class NodeParse(Model):
    """The node's own vLLM parsing a command line: ``loaded`` False when it could not be imported."""

    loaded: bool = False
    ok: bool = False
    version: str | None = None
    interpreter: str | None = None
    error: str | None = None


class RemoteStep(Model):
    """One remote command of a change, as facts (stderr redacted)."""

    command: str
    exit_status: int | None = None
    stderr: str = ""
    unreachable: NodeError | None = None
    detail: str = ""

    @property
    def ok(self) -> bool:
        """True when the command ran and exited 0."""
        return self.unreachable is None and self.exit_status == 0

    def summary(self) -> str:
        """One line: what failed and why (or "ok")."""
        if self.unreachable is not None:
            return f"the node could not be reached: {self.unreachable.reason}"
        if self.ok:
            return "ok"
        err = self.stderr.strip().splitlines()
        return f"`{self.command}` exited with status {self.exit_status}" + (f": {err[-1]}" if err else "") + (
            f" ({self.detail})" if self.detail else "")


def _checked(service: Service) -> tuple[str, str]:
    """The unit and drop-in path, validated again before they reach a command line."""
    path = service.dropin_path()
    if not UNIT_RE.match(service.unit) or not PATH_RE.match(path) or ".." in path.split("/") or \
            not path.startswith("/"):
        raise ValueError(f"refusing unit {service.unit!r} or drop-in path {path!r}")
    return service.unit, path


def read_command(service: Service) -> str:
    """The exact remote command of ``read_unit``."""
    unit, path = _checked(service)
    return f"sh -c {shlex.quote(_READ_SCRIPT)} inferbot-read {shlex.quote(unit)} {shlex.quote(path)}"


def _b64(text: str) -> str | None:
    try:
        return base64.b64decode(text, validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return None


def listening_ports(proc_net_tcp: str) -> list[int]:
    """The local ports in state LISTEN (0A) of ``/proc/net/tcp`` and ``tcp6`` text."""
    ports: set[int] = set()
    for line in proc_net_tcp.splitlines():
        parts = line.split()
        if len(parts) > 3 and parts[3] == "0A" and ":" in parts[1]:
            try:
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
            except ValueError:
                continue
    return sorted(ports)


def parse_read(service: Service, stdout: str) -> UnitRead:
    """``read_unit``'s output as a record."""
    unit, path = _checked(service)
    cat, cat_ok, ours, gpus, tcp = "", False, None, None, ""
    env_files: dict[str, str | None] = {}
    for line in stdout.splitlines():
        name, _, rest = line.partition(" ")
        rc, _, data = rest.partition(" ")
        if name == "cat":
            cat, cat_ok = _b64(data) or "", rc == "0"
        elif name == "dropin" and rc == "0":
            ours = _b64(data)
        elif name == "envfile":
            b64path, _, content = data.partition(" ")
            file_path = _b64(b64path)
            if file_path:
                env_files[file_path] = _b64(content) if rc == "0" else None
        elif name == "gpus" and rc == "0":
            gpus = len([g for g in (_b64(data) or "").splitlines() if g.strip()])
        elif name == "tcp":
            tcp = _b64(data) or ""
    return UnitRead(source=UnitSource(unit=unit, cat=cat, dropin_path=path, dropin_text=ours, env_files=env_files),
                    cat_ok=cat_ok, gpu_count=gpus, listening=listening_ports(tcp))


async def read_unit(pool: NodePool, node: Node, service: Service) -> UnitRead:
    """The unit as systemd sees it, inferbot's drop-in, the GPUs and listening ports (one round trip).

    Raises ``NodeUnreachable`` when the node cannot be asked.
    """
    done = await pool.run(node, read_command(service), limit_s=max(node.timeout, READ_LIMIT_S))
    return parse_read(service, done.stdout)


PARSE_COMMAND = f"sh -c {shlex.quote(_PARSE_SCRIPT)}"


def parse_stdin(program: str, argv: list[str]) -> str:
    """What ``parse_on_node`` writes to the fixed command's stdin."""
    if "\n" in program:
        raise ValueError("a program path with a line break")
    return program + "\n" + json.dumps({"argv": argv})


async def parse_on_node(pool: NodePool, node: Node, program: str, argv: list[str]) -> NodeParse:
    """Ask the node's own vLLM (run by the interpreter of ``program``) to parse ``argv`` (the words after
    ``serve``). Raises ``NodeUnreachable`` when the node cannot be asked."""
    done = await pool.run(node, PARSE_COMMAND, limit_s=max(node.timeout, PARSE_LIMIT_S),
                          stdin=parse_stdin(program, argv))
    interpreter = None
    for line in done.stdout.splitlines():
        if line.startswith("@@inferbot-python@@ "):
            interpreter = line.split(" ", 1)[1]
        if line.startswith(PARSE_MARK):
            try:
                data = json.loads(line[len(PARSE_MARK):])
            except ValueError:
                break
            return NodeParse(loaded=bool(data.get("loaded")), ok=bool(data.get("ok")),
                             version=data.get("version"), interpreter=interpreter,
                             error=redact_patterns(str(data["error"])) if data.get("error") else None)
    err = [ln for ln in done.stderr.splitlines() if ln.strip()]
    why = err[-1] if err else f"the check exited with status {done.exit_status}"
    return NodeParse(loaded=False, interpreter=interpreter, error=redact_patterns(why))


def write_commands(service: Service) -> tuple[str, str]:
    """The two exact commands that put a new drop-in in place: write beside it, then rename over it."""
    _, path = _checked(service)
    new = f"{path}.new"
    return (f"sudo -n install -D -m 0644 /dev/stdin {shlex.quote(new)}",
            f"sudo -n mv -f -- {shlex.quote(new)} {shlex.quote(path)}")


def remove_command(service: Service) -> str:
    """The exact command that removes inferbot's drop-in (and only it)."""
    _, path = _checked(service)
    return f"sudo -n rm -f -- {shlex.quote(path)}"


def reset_failed_command(service: Service) -> str:
    """The exact command that clears the unit's failed state and start-limit counter."""
    unit, _ = _checked(service)
    return f"sudo -n systemctl reset-failed -- {shlex.quote(unit)}"


async def _run(pool: NodePool, node: Node, command: str, stdin: str | None = None) -> RemoteStep:
    try:
        done = await pool.run(node, command, limit_s=max(node.timeout, WRITE_LIMIT_S), stdin=stdin)
    except NodeUnreachable as e:
        return RemoteStep(command=command, unreachable=e.error)
    return RemoteStep(command=command, exit_status=done.exit_status, stderr=redact_patterns(done.stderr)[-2000:])


async def read_dropin(pool: NodePool, node: Node, service: Service) -> str | None:
    """inferbot's drop-in as it is on disk now (None when absent). Raises ``NodeUnreachable``."""
    return (await read_unit(pool, node, service)).source.dropin_text


async def write_dropin(pool: NodePool, node: Node, service: Service, text: str) -> RemoteStep:
    """Put ``text`` in place as inferbot's drop-in (content on stdin), then read it back: the step fails unless
    the file on disk is ``text`` byte for byte."""
    write, rename = write_commands(service)
    step = await _run(pool, node, write, stdin=text)
    if not step.ok:
        return step
    step = await _run(pool, node, rename)
    if not step.ok:
        return step
    try:
        back = await read_dropin(pool, node, service)
    except NodeUnreachable as e:
        return RemoteStep(command=rename, unreachable=e.error)
    if back != text:
        step.exit_status, step.detail = 1, "the file read back differs from what was written"
    return step


async def remove_dropin(pool: NodePool, node: Node, service: Service) -> RemoteStep:
    """Remove inferbot's drop-in (nothing else), then check that it is gone."""
    step = await _run(pool, node, remove_command(service))
    if step.ok:
        try:
            if await read_dropin(pool, node, service) is not None:
                step.exit_status, step.detail = 1, "the file is still there"
        except NodeUnreachable as e:
            step.unreachable = e.error
    return step


async def daemon_reload(pool: NodePool, node: Node, policy: AccessPolicy) -> RemoteStep:
    """``[access] reload_command`` (default ``sudo -n systemctl daemon-reload``): systemd reads the files again."""
    return await _run(pool, node, policy.reload_command)


async def reset_failed(pool: NodePool, node: Node, service: Service) -> RemoteStep:
    """``sudo -n systemctl reset-failed -- UNIT``: a rollback that met the start limit may start again."""
    return await _run(pool, node, reset_failed_command(service))
