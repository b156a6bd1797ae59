"""How each contender answers the settings question, and what it costs the client (wall, CPU, RSS).

Every contender sends the same remote command to every node: inferbot's own probe for the settings
question (``services.node.probe.build_script`` with ``handlers.settings.SETTINGS_PROBE``, wrapped by
``remote_command``), built here from the same config the bot reads. The warm client reports a hash of what
the bot really sent, and the report checks that it matches.

Client CPU is measured, never estimated: ``os.wait4`` gives each finished child's user+sys time
(including its own waited-for children), and an OpenSSH multiplexing master, which detaches, is read
from ``/proc/PID/stat`` before and after each question.
"""

from __future__ import annotations

import asyncio
import compileall
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import (
    QUESTION,
    REPO_ROOT,
    Manifest,
    NodeInfo,
    cgroup_usage_s,
    summarize,
    tree_cpu_s,
    tree_memory,
)
from config.loader import load_config
from config.models import Node
from handlers.settings import SETTINGS_PROBE
from services.cluster import Cluster
from services.models import CommandResult, NodeError
from services.node.probe import ProbeTarget, build_script, remote_command
from services.node.ssh import AnswerEnd, NodePool, NodeUnreachable

END_MARK = "@@inferbot@@ end"
CLK_TCK = os.sysconf("SC_CLK_TCK")
ANSIBLE_VENV = REPO_ROOT / "bench" / ".venv-ansible"


@dataclass
class Run:
    """One question asked of N nodes by one contender."""

    wall_s: float
    cpu_s: float  # client side: every process the contender ran, user+sys
    peak_rss_kib: int  # the largest single client process
    rss_sum_kib: int = 0  # the peaks of all client processes that ran at once, added up
    error: str | None = None


@dataclass
class Result:
    """All runs of one contender at one N."""

    contender: str
    nodes: int
    runs: list[Run] = field(default_factory=list)
    unavailable: str | None = None
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    cluster: str = "simulated"  # the nodes asked: "simulated" (bench.cluster) or "cheap" (bench.cheap)


def settings_commands(config_path: str) -> dict[str, str]:
    """Node name -> the exact command inferbot sends for the settings question (as in ``Cluster.probe_node``)."""
    config = load_config(config_path)
    out: dict[str, str] = {}
    for node in config.nodes:
        services = [s for s in config.services if s.node == node.name]
        targets = [ProbeTarget(unit=s.unit, api_url=s.api_url, log_file=s.log_file, bench_dir=s.bench_dir)
                   for s in services]
        opts = SETTINGS_PROBE.model_copy(update={"discover": not services})
        out[node.name] = remote_command(build_script(targets, opts))
    return out


class _RecordingPool(NodePool):
    """A pool that only notes what would be sent (command and stdin) and reaches no node."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: dict[str, tuple[str, str | None]] = {}

    async def run(self, node: Node, command: str, limit_s: float | None = None, stdin: str | None = None,
                  wait_s: float | None = None, read_only: bool = False) -> CommandResult:
        self.sent[node.name] = (command, stdin)
        raise NodeUnreachable(NodeError(kind="other", reason="recorded, not sent", fix=""))

    async def ask(self, node: Node, command: str, end: AnswerEnd, limit_s: float | None = None,
                  wait_s: float | None = None) -> CommandResult:
        self.sent[node.name] = (command, None)  # a session's stdin is the trigger: one newline per answer
        raise NodeUnreachable(NodeError(kind="other", reason="recorded, not sent", fix=""))


def watch_commands(config_path: str, persistent: bool = False) -> dict[str, tuple[str, str | None]]:
    """Node name -> (command, stdin) the unplanned-restart watcher sends: taken from ``Cluster.probe_node``
    with ``handlers.watcher.WATCH_PROBE`` itself, so it follows whatever the product builds.

    ``persistent``: the command of the leader's persistent session instead (``NodePool.ask``: it answers once
    per newline written to it), not the one-shot command a pool without sessions runs.
    """
    # Imported here: handlers.watcher brings the store (SQLAlchemy), which would raise this runner's own RSS,
    # and so the floor below which a child's ru_maxrss cannot be told from ours (see report.RSS_CAVEAT).
    from handlers.watcher import WATCH_PROBE

    config = load_config(config_path)
    pool = _RecordingPool()
    pool.keep_sessions(persistent)
    cluster = Cluster(config, pool)

    async def all_nodes() -> None:
        for node in config.nodes:
            services = [s for s in config.services if s.node == node.name]
            await cluster.probe_node(node, services, WATCH_PROBE)

    asyncio.run(all_nodes())
    return dict(pool.sent)


# ----------------------------------------------------------------------------------------------------------
# running processes and measuring them


@dataclass
class Proc:
    """A started child whose output goes to temp files (so ``os.wait4`` can reap it with its rusage)."""

    popen: subprocess.Popen[bytes]
    out: Any
    err: Any
    started: float


def spawn(argv: Sequence[str], env: dict[str, str] | None = None, cwd: str | None = None,
          new_session: bool = False) -> Proc:
    """Start ``argv`` with stdin from /dev/null and stdout/stderr into temp files."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    started = time.perf_counter()
    p = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env, cwd=cwd,
                         start_new_session=new_session)
    return Proc(popen=p, out=out, err=err, started=started)


@dataclass
class Done:
    """A reaped child: exit code, wall time, CPU, peak RSS and what it printed."""

    rc: int
    wall_s: float
    cpu_s: float
    maxrss_kib: int
    stdout: str
    stderr: str


def reap(proc: Proc, timeout_s: float) -> Done:
    """Wait for ``proc`` (killing its process group past ``timeout_s``) and collect its rusage."""
    deadline = time.monotonic() + timeout_s
    pid = proc.popen.pid
    try:
        while True:
            wpid, status, ru = os.wait4(pid, os.WNOHANG)
            if wpid == pid:
                break
            if time.monotonic() > deadline:
                _kill(pid)
                wpid, status, ru = os.wait4(pid, 0)
                break
            time.sleep(0.002)
    except BaseException:
        # Ctrl-C or any error while waiting: never leave the child (or its process group) behind.
        _kill(pid)
        with contextlib.suppress(ChildProcessError):
            os.wait4(pid, 0)
        raise
    wall = time.perf_counter() - proc.started
    proc.popen.returncode = os.waitstatus_to_exitcode(status)
    texts = []
    for f in (proc.out, proc.err):
        f.seek(0)
        texts.append(f.read().decode("utf-8", "replace"))
        f.close()
    return Done(rc=proc.popen.returncode, wall_s=wall, cpu_s=ru.ru_utime + ru.ru_stime, maxrss_kib=ru.ru_maxrss,
                stdout=texts[0], stderr=texts[1])


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        if _own_group(pid):
            os.killpg(pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)


def _own_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except OSError:
        return False


def _proc_cpu_s(pid: int) -> float:
    """user+sys of a live process (not its children) from /proc; 0 when it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, ValueError, IndexError):
        return 0.0


def _logged_exception(stderr: str) -> str:
    """The last line of the last traceback in inferbot's JSON log lines on stderr ("" when none)."""
    found = ""
    for line in stderr.splitlines():
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            exc = json.loads(line).get("exc")
            if exc:
                found = exc.strip().splitlines()[-1][:300]
    return found


def _first_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    return lines[-1][:300] if lines else ""


# ----------------------------------------------------------------------------------------------------------
# inferbot


PROJECT_PACKAGES = ("bot", "config", "handlers", "services")
"""The project's own packages: compiled before the cold runs (see :func:`compile_project`)."""


def compile_project() -> None:
    """Byte-compile the project's modules in place, as ``pip install`` does for an installed inferbot.

    The benchmark runs inferbot from this checkout, where nothing compiles them when PYTHONDONTWRITEBYTECODE
    is set (as in the Dockerfile and on the benchmark machine): every cold run would then compile them
    again (~90 ms of CPU) — a cost no installed copy has, since pip compiles a wheel's modules on install
    (whatever PYTHONDONTWRITEBYTECODE says). Third-party packages were compiled by pip already.
    """
    for package in PROJECT_PACKAGES:
        compileall.compile_dir(str(REPO_ROOT / package), quiet=1)


def inferbot_cold(manifest: Manifest, n: int, runs: int, timeout_s: float = 120.0) -> Result:
    """``inferbot ask "…" --json --config FILE`` as a fresh process: whole-process wall, CPU and peak RSS.

    The project's modules are compiled first (:func:`compile_project`): a cold start of an installed inferbot.
    """
    res = Result("inferbot cold", n, cluster=manifest.kind)
    compile_project()
    exe = str(Path(sys.executable).with_name("inferbot"))
    argv = [exe, "ask", QUESTION, "--json", "--config", manifest.configs[n]]
    for _ in range(runs):
        d = reap(spawn(argv, env=_env(), new_session=True), timeout_s)
        err = None
        try:
            reply = json.loads(d.stdout)
            bad = [x["node"] for x in reply["data"]["nodes"] if not x["ok"]]
            if not reply["ok"] or len(reply["data"]["nodes"]) != n or bad:
                err = f"nodes not ok: {bad[:5]}"
        except (ValueError, KeyError, TypeError):
            err = f"exit {d.rc}: {_first_line(d.stderr or d.stdout)}"
        if err is not None and (tb := _logged_exception(d.stderr)):
            err += f" ({tb})"
        res.runs.append(Run(d.wall_s, d.cpu_s, d.maxrss_kib, d.maxrss_kib, err))
    return res


def inferbot_warm(manifest: Manifest, n: int, runs: int, timeout_s: float | None = None,
                  first_start: bool = False) -> Result:
    """The long-lived bot path in its own process (``bench.warm_client``); see that module. ``first_start``:
    also the peak RSS of one more run on a new state database (``--new-store``)."""
    res = Result("inferbot warm", n, cluster=manifest.kind)
    timeout_s = timeout_s if timeout_s is not None else 300.0 + n * (0.5 + 0.1 * runs)
    argv = [sys.executable, "-m", "bench.warm_client", "--config", manifest.configs[n], "--runs", str(runs)]
    d = reap(spawn(argv, env=_env(), cwd=str(REPO_ROOT), new_session=True), timeout_s)
    try:
        data = json.loads(d.stdout)
    except ValueError:
        res.unavailable = f"warm client failed (exit {d.rc}): {_first_line(d.stderr)}"
        return res
    for i, wall in enumerate(data["wall_s"]):
        cpu = data["cpu_ms_per_node"][i] * n / 1000
        res.runs.append(Run(wall, cpu, data["peak_rss_kib"], data["peak_rss_kib"], data["run_errors"][i]))
    if data.get("warmup_error"):
        res.notes.append(f"the warm-up question failed: {data['warmup_error']}")
    res.extra = {k: data[k] for k in ("round_trips_per_node", "run_errors", "connects", "connects_after_warmup",
                                       "warmup_wall_s", "warmup_cpu_ms_per_node", "command_digest",
                                       "slack_front_end_imported", "rss_before_first_question_kib", "messages",
                                       "render_s", "render_cpu_ms_per_node", "alembic_imported")
                 if k in data}
    res.extra["process_cpu_s_total"] = d.cpu_s
    if first_start:
        # The same bot starting on a new state database: serve's start has a helper process create the schema.
        d = reap(spawn([*argv[:-1], "1", "--new-store"], env=_env(), cwd=str(REPO_ROOT), new_session=True), timeout_s)
        try:
            res.extra["first_start_peak_rss_kib"] = json.loads(d.stdout)["peak_rss_kib"]
        except ValueError:
            res.notes.append(f"the first-start run failed (exit {d.rc}): {_first_line(d.stderr)}")
    return res


def _env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "SSH_AUTH_SOCK", "INFERBOT_"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.setdefault("LC_ALL", "C.UTF-8")
    return env | (extra or {})


# ----------------------------------------------------------------------------------------------------------
# OpenSSH


def _ssh_base(manifest: Manifest) -> list[str]:
    return ["ssh", "-F", manifest.ssh_config]


def _dest(manifest: Manifest, node: NodeInfo) -> list[str]:
    """How ``ssh`` names ``node``: its Host entry (simulated nodes), or ``-p PORT ADDRESS`` (cheap nodes, whose
    ssh_config has no per-node entries)."""
    if manifest.kind == "cheap":
        return ["-p", str(node.port), node.host]
    return [node.name]


def _check_outputs(outputs: list[Done]) -> str | None:
    for d in outputs:
        if d.rc != 0 or END_MARK not in d.stdout:
            return f"exit {d.rc}: {_first_line(d.stderr) or 'probe output incomplete'}"
    return None


def openssh_sequential(manifest: Manifest, n: int, runs: int, commands: dict[str, str],
                       timeout_s: float = 60.0) -> Result:
    """One ``ssh`` per node, one after another (new connection each; host keys checked, BatchMode)."""
    res = Result("OpenSSH sequential", n, cluster=manifest.kind)
    base = [*_ssh_base(manifest), "-o", "ControlMaster=no", "-o", "ControlPath=none"]
    nodes = manifest.nodes[:n]
    for _ in range(runs):
        started = time.perf_counter()
        done = [reap(spawn([*base, *_dest(manifest, node), commands[node.name]]), timeout_s) for node in nodes]
        wall = time.perf_counter() - started
        res.runs.append(Run(wall, sum(d.cpu_s for d in done), max(d.maxrss_kib for d in done),
                            max(d.maxrss_kib for d in done), _check_outputs(done)))
    return res


@contextlib.contextmanager
def control_dir() -> Iterator[Path]:
    """A short directory for ControlPath sockets; every master found in it is told to exit afterwards."""
    d = Path(tempfile.mkdtemp(prefix="ibm-", dir="/tmp"))
    try:
        yield d
    finally:
        close_masters(d)
        shutil.rmtree(d, ignore_errors=True)


def close_masters(d: Path) -> None:
    """``ssh -O exit`` every multiplexing master whose socket is in ``d``."""
    socks = [p for p in d.rglob("*") if p.is_socket()]
    procs = [subprocess.Popen(["ssh", "-F", "/dev/null", "-o", f"ControlPath={s}", "-O", "exit", "x"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
             for s in socks]
    for p in procs:
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _master_pids(manifest: Manifest, mux: list[str], nodes: list[NodeInfo], batch: int = 64) -> list[int]:
    """The multiplexing master's pid of each node (``ssh -O check``, ``batch`` at a time); 0 when not found."""
    out: list[int] = []
    for i in range(0, len(nodes), batch):
        procs = [spawn([*_ssh_base(manifest), *mux, "-O", "check", *_dest(manifest, node)])
                 for node in nodes[i:i + batch]]
        for p in procs:
            d = reap(p, 10)
            m = re.search(r"pid=(\d+)", d.stderr + d.stdout)
            out.append(int(m.group(1)) if m else 0)
    return out


def openssh_multiplexed(manifest: Manifest, n: int, runs: int, commands: dict[str, str],
                        timeout_s: float = 60.0) -> Result:
    """``ControlMaster=auto``/``ControlPersist=60``: masters warmed first, then all N ``ssh`` at once.

    On cheap nodes it also measures the node side during the measured runs: the CPU of every sshd process
    (and what they reaped: the shells and ``cat``) per question per node, and, with the N masters connected,
    the node side's processes and memory.
    """
    res = Result("OpenSSH parallel mux", n, cluster=manifest.kind)
    nodes = manifest.nodes[:n]
    with control_dir() as d:
        mux = ["-o", "ControlMaster=auto", "-o", f"ControlPath={d}/%C", "-o", "ControlPersist=120"]
        base = [*_ssh_base(manifest), *mux]
        warm = [reap(p, timeout_s) for p in [spawn([*base, *_dest(manifest, node), "true"]) for node in nodes]]
        if (why := _check_warm(warm)) is not None:
            res.unavailable = f"could not warm the masters: {why}"
            return res
        masters = _master_pids(manifest, mux, nodes)
        res.extra["masters_found"] = sum(1 for m in masters if m)
        node_cpu0 = _node_cpu_s(manifest)
        ok_runs = 0
        for _ in range(runs):
            m0 = sum(_proc_cpu_s(m) for m in masters if m)
            started = time.perf_counter()
            procs = [spawn([*base, *_dest(manifest, node), commands[node.name]]) for node in nodes]
            done = [reap(p, timeout_s) for p in procs]
            wall = time.perf_counter() - started
            master_cpu = sum(_proc_cpu_s(m) for m in masters if m) - m0
            err = _check_outputs(done)
            ok_runs += err is None
            res.runs.append(Run(wall, sum(x.cpu_s for x in done) + master_cpu, max(x.maxrss_kib for x in done),
                                sum(x.maxrss_kib for x in done), err))
        if manifest.kind == "cheap" and runs:
            node_cpu = _node_cpu_s(manifest) - node_cpu0
            res.extra["node_side"] = {"cpu_ms_per_node_per_question": round(node_cpu * 1000 / (runs * n), 3),
                                      "questions": runs * n, "cpu_accounting": manifest.node_side.get("cpu_accounting"),
                                      **tree_memory(manifest.cluster_pid)}
            res.extra["client_side_masters"] = tree_memory_of(masters)
    res.notes.append("client CPU includes the multiplexing masters (read from /proc before and after)")
    return res


def _node_cpu_s(manifest: Manifest) -> float:
    """CPU used so far by the cheap nodes' sshd and all they forked (their cgroup, else /proc); 0 elsewhere."""
    if manifest.kind != "cheap":
        return 0.0
    if (path := manifest.node_side.get("cgroup")) and (used := cgroup_usage_s(path)) is not None:
        return used
    return tree_cpu_s(manifest.cluster_pid)


def tree_memory_of(pids: list[int]) -> dict[str, float | int]:
    """PSS and RSS added up over ``pids`` (the multiplexing masters), in MB."""
    rss = pss = 0
    for pid in pids:
        if not pid:
            continue
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                for line in f:
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return {"processes": sum(1 for p in pids if p), "rss_sum_mb": round(rss / 1024, 1), "pss_mb": round(pss / 1024, 1)}


def _check_warm(done: list[Done]) -> str | None:
    bad = [d for d in done if d.rc != 0]
    return f"exit {bad[0].rc}: {_first_line(bad[0].stderr)}" if bad else None


def key_exchanges(manifest: Manifest) -> dict[str, str]:
    """The key exchange each SSH client negotiates with the nodes' sshd (from ``ssh -vv`` and asyncssh's list).

    asyncssh picks the first of its own preferred algorithms that the server offers, so its choice follows
    from the server's proposal that ``ssh -vv`` prints.
    """
    node = manifest.nodes[0]
    try:
        out = subprocess.run([*_ssh_base(manifest), "-vv", "-o", "ControlMaster=no", "-o", "ControlPath=none",
                              node.name, "true"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return {}
    found: dict[str, str] = {}
    if m := re.search(r"kex: algorithm: (\S+)", out):
        found["openssh"] = m.group(1)
    server = out.partition("peer server KEXINIT proposal")[2]
    if m := re.search(r"KEX algorithms: (\S+)", server):
        offered = set(m.group(1).split(","))
        try:
            from asyncssh.kex import get_default_kex_algs

            mine = [a.decode() for a in get_default_kex_algs() if not a.startswith(b"gss-")]
            found["asyncssh"] = next((a for a in mine if a in offered), "none in common")
        except ImportError:
            pass
    return found


# ----------------------------------------------------------------------------------------------------------
# Ansible


def ensure_ansible(install: bool = True) -> tuple[str | None, str]:
    """Path of ``ansible`` in the benchmark-only venv (created on demand) and its version, or None and why."""
    exe = ANSIBLE_VENV / "bin" / "ansible"
    if not exe.exists() and install:
        try:
            if not (ANSIBLE_VENV / "bin" / "pip").exists():
                subprocess.run([_base_python(), "-m", "venv", str(ANSIBLE_VENV)], check=True,
                               capture_output=True, timeout=120)
            subprocess.run([str(ANSIBLE_VENV / "bin" / "pip"), "install", "-q", "ansible-core"], check=True,
                           capture_output=True, timeout=600)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as e:
            detail = getattr(e, "stderr", b"") or b""
            text = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
            return None, f"installing ansible-core into {ANSIBLE_VENV} failed: {_first_line(text) or e}"
    if not exe.exists():
        return None, f"ansible-core is not installed in {ANSIBLE_VENV}"
    try:
        with tempfile.TemporaryDirectory(prefix="ibm-ah-") as home:
            out = subprocess.run([str(exe), "--version"], capture_output=True, text=True, timeout=60,
                                 env=_env({"ANSIBLE_HOME": home}))
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"ansible --version failed: {e}"
    m = re.search(r"core ([\d.]+\w*)", out.stdout)
    return str(exe), m.group(1) if m else _first_line(out.stdout)


def _base_python() -> str:
    """The interpreter the project's venv was made from (``sys._base_executable`` when available)."""
    return str(getattr(sys, "_base_executable", None) or sys.executable)


def write_ansible_files(d: Path, manifest: Manifest, n: int, commands: dict[str, str]) -> tuple[Path, Path]:
    """An inventory copy with ``host_vars`` carrying each node's probe command (``!unsafe``: no templating)."""
    inv = d / "inventory.ini"
    shutil.copy(manifest.inventories[n], inv)
    hv = d / "host_vars"
    hv.mkdir(exist_ok=True)
    for node in manifest.nodes[:n]:
        (hv / f"{node.name}.yml").write_text(f"probe_cmd: !unsafe {json.dumps(commands[node.name])}\n")
    cfg = d / "ansible.cfg"
    cfg.write_text("\n".join([
        "[defaults]", "host_key_checking = True", "interpreter_python = /usr/bin/python3",
        "deprecation_warnings = False", "retry_files_enabled = False", "nocolor = True",
        "[ssh_connection]", "pipelining = True", f"control_path_dir = {d}/cp",
        # Ansible's own default ssh_args plus the same key, known_hosts and strict checking as the others.
        f"ssh_args = -F {manifest.ssh_config} -C -o ControlMaster=auto -o ControlPersist=60s", "",
    ]))
    return inv, cfg


def ansible_adhoc(manifest: Manifest, n: int, runs: int, commands: dict[str, str], exe: str,
                  budget_s: float = 1e9, timeout_s: float = 300.0) -> Result:
    """``ansible all -i INV -m shell -a '{"cmd": "{{ probe_cmd }}"}' -f N`` (pipelining on, host keys checked).

    The first run opens the SSH connections and is reported apart; then up to ``runs`` measured runs, fewer
    when the next one would end past ``budget_s`` (at least one).
    """
    res = Result("Ansible ad-hoc", n, cluster=manifest.kind)
    d = Path(tempfile.mkdtemp(prefix="ibm-a-", dir="/tmp"))
    try:
        inv, cfg = write_ansible_files(d, manifest, n, commands)
        env = _env({"ANSIBLE_CONFIG": str(cfg), "ANSIBLE_HOME": str(d / "home"),
                    "ANSIBLE_LOCAL_TEMP": str(d / "tmp")})
        args = json.dumps({"cmd": "{{ probe_cmd }}"})  # per-node command from host_vars
        argv = [exe, "all", "-i", str(inv), "-m", "shell", "-a", args, "-f", str(n)]
        started = time.monotonic()
        for i in range(runs + 1):
            dn = reap(spawn(argv, env=env, new_session=True), timeout_s)
            found = dn.stdout.count(END_MARK)
            err = None if dn.rc == 0 and found == n else (
                f"exit {dn.rc}, {found}/{n} complete: " + _first_line(dn.stderr or dn.stdout))
            run = Run(dn.wall_s, dn.cpu_s, dn.maxrss_kib, dn.maxrss_kib, err)
            if i == 0:
                # The first run opens the SSH connections; later ones reuse Ansible's ControlPersist masters.
                res.extra.update(first_run_wall_s=run.wall_s, first_run_cpu_s=run.cpu_s, first_run_error=run.error)
                continue
            res.runs.append(run)
            spent = time.monotonic() - started
            if i < runs and spent + spent / (i + 1) > budget_s:
                res.notes.append(f"{i} measured runs instead of {runs}: each takes {spent / (i + 1):.1f}s here "
                                 f"and Ansible's time budget per N is {budget_s:g}s")
                break
        res.notes.append("medians exclude the first run, which opens the connections (first_run_wall_s); later "
                         "runs reuse Ansible's default ControlPersist=60s masters, whose own CPU is not counted")
    finally:
        close_masters(d / "cp")
        shutil.rmtree(d, ignore_errors=True)
    return res


# ----------------------------------------------------------------------------------------------------------
# the simulator's own cost


def simulator_cost(manifest: Manifest, commands: dict[str, str], runs: int, max_nodes: int = 4) -> Result:
    """The probe run locally by ``/bin/sh -c`` as the login user with the node's environment: no SSH at all."""
    res = Result("simulator (local sh, no SSH)", 1)
    for node in manifest.nodes[:max_nodes]:
        env = {"HOME": os.path.expanduser(f"~{node.user}"), "USER": node.user, "LOGNAME": node.user,
               "SHELL": "/bin/sh", **node.env}
        user = node.user if os.geteuid() == 0 else None
        for _ in range(runs):
            out = tempfile.TemporaryFile()
            started = time.perf_counter()
            p = subprocess.Popen(["/bin/sh", "-c", commands[node.name]], stdin=subprocess.DEVNULL, stdout=out,
                                 stderr=subprocess.DEVNULL, env=env, user=user, cwd="/")
            _, status, ru = os.wait4(p.pid, 0)
            wall = time.perf_counter() - started
            p.returncode = os.waitstatus_to_exitcode(status)
            out.seek(0)
            text = out.read().decode("utf-8", "replace")
            out.close()
            err = None if END_MARK in text else f"exit {p.returncode}: probe output incomplete"
            res.runs.append(Run(wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss, ru.ru_maxrss, err))
    res.notes.append(f"{min(max_nodes, len(manifest.nodes))} nodes x {runs} runs; CPU includes every "
                     "command the script ran (fake systemctl/journalctl/nvidia-smi, curl, base64, awk)")
    return res


# ----------------------------------------------------------------------------------------------------------
# start-up


def startup(runs: int, timeout_s: float = 60.0) -> dict[str, Any]:
    """``inferbot --help`` as a fresh process, and the interpreter's own start-up (``python -c pass``) beside it."""
    exe = str(Path(sys.executable).with_name("inferbot"))
    out: dict[str, Any] = {}
    for key, what, argv in (("help", "inferbot --help", [exe, "--help"]),
                            ("python", "python -c pass (the interpreter alone)", [sys.executable, "-c", "pass"])):
        reap(spawn(argv, env=_env()), timeout_s)  # page cache and .pyc files, as on a machine in use
        done = [reap(spawn(argv, env=_env()), timeout_s) for _ in range(runs)]
        bad = [d for d in done if d.rc != 0]
        out[key] = {"what": what, "wall_s": summarize([d.wall_s for d in done]),
                    "cpu_s": summarize([d.cpu_s for d in done]), "runs": runs,
                    "errors": [f"exit {d.rc}: {_first_line(d.stderr)}" for d in bad][:2]}
    return out


def watcher_at_scale(manifest: Manifest, n: int, intervals: int, push: bool = False) -> dict[str, Any]:
    """``python -m bench.watch_scale`` against the first ``n`` cheap nodes (see that module): the polls alone,
    or with the leader's journal streams (``push``: its intervals are ``[watch] safety_interval``)."""
    config = (manifest.push_watch_configs if push else manifest.watch_configs)[n]
    argv = [sys.executable, "-m", "bench.watch_scale", "--config", config, "--intervals", str(intervals)]
    d = reap(spawn(argv, env=_env({"INFERBOT_LOG_LEVEL": "ERROR"}), cwd=str(REPO_ROOT), new_session=True),
             300.0 + intervals * (150.0 if push else 30.0))
    try:
        data: dict[str, Any] = json.loads(d.stdout)
    except ValueError:
        return {"status": f"not measured (the watcher process failed, exit {d.rc}: {_first_line(d.stderr)})"}
    data["status"] = "measured" if not data.get("errors") else "measured, with errors"
    data["process_cpu_s_total"] = round(d.cpu_s, 2)
    return data
