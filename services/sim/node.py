"""A simulated GPU node running vLLM services under a simulated systemd, inside the caller's event loop.

Everything the bot's probe reads is real files and real processes under ``root``:

* ``etc/systemd/system/*.service`` (+ ``.d/*.conf``), ``etc/vllm/*.env``: real unit syntax, parsed to run;
* ``opt/vllm/venv/bin/vllm``: a console script (shebang ``.../python3``) running the fake vLLM server, so
  ``/proc/<MainPID>/cmdline`` and ``environ`` are what a real deployment shows;
* ``state/``: what the fake ``systemctl``/``journalctl``/``nvidia-smi`` (POSIX sh + awk in ``sim/bin``) print,
  re-rendered on every change (temp file + rename);
* ``run/control.sock``: where the fake ``systemctl`` sends start/stop/restart/... and waits for the job.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import pwd
import shutil
import signal
import stat
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO

from aiohttp import web

from services.sim.scenarios import NodeScenario, StaticUnit, UnitScenario
from services.sim.units import ExecLine, LoadedUnit, load_unit
from services.sim.venv import write_vllm_package

SIM_DIR = Path(__file__).resolve().parent
BIN_SRC = SIM_DIR / "bin"
REPO_ROOT = SIM_DIR.parent.parent
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SimState = Literal["stopped", "starting", "loading", "ready", "failed", "restarting", "unhealthy", "stopping"]
_SHELL_NEED_QUOTES = set("\"\\`$*?['()<>|&;!")
_EXIT_STATUS_NAMES = {0: "SUCCESS", 1: "FAILURE", 2: "INVALIDARGUMENT", 3: "NOTIMPLEMENTED", 4: "NOPERMISSION",
                      5: "NOTINSTALLED", 6: "NOTCONFIGURED", 7: "NOTRUNNING", 203: "EXEC", 217: "USER",
                      200: "CHDIR"}  # fmt: skip


def _now_us() -> int:
    return int(time.time() * 1_000_000)


def fmt_ts(us: int) -> str:
    """systemd's default timestamp format (UTC): ``Wed 2026-12-02 09:57:53 UTC``; empty for 0."""
    if not us:
        return ""
    return time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(us / 1_000_000))


def shell_maybe_quote(s: str) -> str:
    """systemd's ``shell_maybe_quote`` (used for the ``Environment=`` property)."""
    if s and not any(c.isspace() or c in _SHELL_NEED_QUOTES for c in s):
        return s
    out = "".join("\\" + c if c in '"\\`$' else c for c in s)
    return f'"{out}"'


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name.removeprefix("SIG")
    except ValueError:
        return str(sig)


def _write_atomic(path: Path, text: str, mode: int = 0o644) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return False
    state = data.rpartition(")")[2].split()[:1]
    return bool(state) and state[0] not in ("Z", "X")


@dataclass
class ExecStatus:
    start_us: int = 0
    stop_us: int = 0
    pid: int = 0
    code: str = "(null)"  # (null) | exited | killed
    status: int = 0

    def status_text(self) -> str:
        if self.code == "exited":
            return str(self.status)
        return f"{self.status}/{_signame(self.status) if self.status else 0}"

    def human(self) -> str:
        if self.code == "exited":
            return f"code=exited, status={self.status}/{_EXIT_STATUS_NAMES.get(self.status, str(self.status))}"
        if self.code == "killed":
            return f"code=killed, signal={_signame(self.status)}"
        return ""


@dataclass
class Holder:
    """A process holding memory on one GPU."""

    pid: int
    name: str
    gpu: int
    unit: str
    run: str  # invocation id of the start that created it
    mib: float = 0.0


@dataclass
class JobResult:
    rc: int
    message: str = ""


@dataclass
class UnitSnapshot:
    name: str
    active: str
    sub: str
    result: str
    main_pid: int
    n_restarts: int
    invocation_id: str
    sim_state: SimState
    need_daemon_reload: bool
    worker_pids: list[int]
    load_state: str


@dataclass
class _Unit:
    sc: UnitScenario
    name: str
    fragment: Path
    loaded: LoadedUnit | None = None
    need_reload: bool = False
    active: str = "inactive"
    sub: str = "dead"
    result: str = "success"
    main_pid: int = 0
    control_pid: int = 0
    control_cmd: ExecLine | None = None
    proc: asyncio.subprocess.Process | None = None
    pgids: set[int] = field(default_factory=set)
    invocation: str = ""
    n_restarts: int = 0
    exec_main: ExecStatus = field(default_factory=ExecStatus)
    exec_pre: list[ExecStatus] = field(default_factory=list)
    state_change_us: int = 0
    active_enter_us: int = 0
    active_exit_us: int = 0
    inactive_enter_us: int = 0
    inactive_exit_us: int = 0
    start_times: list[float] = field(default_factory=list)
    task: asyncio.Task[None] | None = None
    stopping: bool = False
    leave_workers: bool = False
    phase: str = ""
    child_pids: list[int] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    first_start: bool = True
    pump: asyncio.Task[None] | None = None
    mtimes: dict[str, float] = field(default_factory=dict)


class SimNode:
    def __init__(self, root: Path, scenario: NodeScenario, run_as: str | None = None) -> None:
        self.root = Path(root).resolve()
        self.sc = scenario
        self.run_as = run_as
        self.bin = self.root / "sim" / "bin"
        self.state_dir = self.root / "state"
        self.unit_dir = self.root / "etc" / "systemd" / "system"
        self.sock_path = self.root / "run" / "control.sock"
        self.units: dict[str, _Unit] = {}
        self.holders: dict[int, Holder] = {}
        self.ghosts: list[tuple[float, int, float]] = []  # (expires monotonic, gpu, mib)
        self._jfh: TextIO | None = None
        self._jfirst = 1  # the sequence number of the active journal file's first line (journald's seqnum)
        self._jlines = 0  # lines in the active journal file
        self._runner: web.AppRunner | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._pumps: set[asyncio.Task[None]] = set()
        self._all_pgids: set[int] = set()
        self._known_pids: set[int] = set()
        self._started = False
        self._uid: int | None = None
        self._gid: int | None = None
        if run_as:
            pw = pwd.getpwnam(run_as)
            self._uid, self._gid = pw.pw_uid, pw.pw_gid
        for us in scenario.units:
            fname = us.file_name or us.name
            if "@" in us.name and not us.file_name:
                prefix = us.name.split("@", 1)[0]
                fname = f"{prefix}@.service"
            self.units[us.name] = _Unit(sc=us, name=us.name, fragment=self.unit_dir / fname)

    # ------------------------------------------------------------------------------------------------------
    # public API

    def shell_env(self) -> dict[str, str]:
        return {"PATH": f"{self.bin}:/usr/local/bin:/usr/bin:/bin", "INFERBOT_SIM_ROOT": str(self.root)}

    @property
    def bench_dir(self) -> str:
        return self.sc.render(self.sc.bench_dir, self.root)

    def api_url(self, unit: str) -> str:
        return f"http://127.0.0.1:{self.units[unit].sc.port}"

    async def start(self) -> None:
        self._write_tree()
        for u in self.units.values():
            self._load(u)
        self._open_journal()
        await self._start_control()
        self._render_all()
        self._ticker = asyncio.create_task(self._tick())
        self._started = True
        boot = [u.name for u in self.units.values() if u.sc.active_on_boot]
        await asyncio.gather(*(self._do_start(self.units[n], manual=False) for n in boot))

    async def stop(self) -> None:
        """Kill every process the node spawned (process groups), close the control server."""
        if self._ticker:
            self._ticker.cancel()
        for u in self.units.values():
            u.stopping = True
            if u.task and not u.task.done():
                u.task.cancel()
        pids = set(self.holders) | self._known_pids
        for pgid in list(self._all_pgids):
            with contextlib.suppress(OSError):
                os.killpg(pgid, signal.SIGKILL)
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for u in self.units.values():
            if u.proc and u.proc.returncode is None:
                with contextlib.suppress(TimeoutError, ProcessLookupError):
                    await asyncio.wait_for(u.proc.wait(), 2)
            if u.task:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await u.task
        for t in list(self._pumps):
            t.cancel()
        for _ in range(150):  # up to 3 s until the kernel has taken them all
            if not any(_alive(p) for p in pids):
                break
            await asyncio.sleep(0.02)
        if self._runner:
            await self._runner.cleanup()
            self._runner = None
        if self._jfh is not None:
            self._jfh.close()
            self._jfh = None

    async def restart_unit(self, unit: str) -> JobResult:
        return await self._verb("restart", unit)

    async def start_unit(self, unit: str) -> JobResult:
        return await self._verb("start", unit)

    async def stop_unit(self, unit: str) -> JobResult:
        return await self._verb("stop", unit)

    async def reset_failed(self, unit: str | None = None) -> JobResult:
        return await self._verb("reset-failed", unit or "")

    async def crash(self, unit: str, leave_workers: bool = False) -> None:
        """SIGKILL the main process (like an OOM kill); with ``leave_workers`` its children survive."""
        u = self.units[unit]
        if not u.main_pid:
            raise RuntimeError(f"{unit} has no main process")
        u.leave_workers = leave_workers
        os.kill(u.main_pid, signal.SIGKILL)
        proc = u.proc
        if proc is not None:
            await proc.wait()
        await asyncio.sleep(0)

    def edit_unit(self, unit: str, text: str, drop_in: str | None = None) -> None:
        """Rewrite the unit file (or one drop-in) on disk; systemd notices: NeedDaemonReload=yes."""
        u = self.units[unit]
        rendered = self.sc.render(text, self.root, u.sc.port)
        if drop_in:
            d = Path(str(u.fragment) + ".d")
            d.mkdir(exist_ok=True)
            os.chmod(d, 0o755)
            _write_atomic(d / drop_in, rendered)
        else:
            _write_atomic(u.fragment, rendered)
        u.need_reload = True
        self._render_unit(u)

    async def daemon_reload(self) -> None:
        for u in self.units.values():
            self._load(u)
            u.need_reload = False
        self._render_all()

    async def wait_for(self, unit: str, state: str, timeout: float) -> None:  # noqa: ASYNC109
        deadline = time.monotonic() + timeout
        while True:
            snap = self.state(unit)
            if snap.sim_state == state or (state == "failed" and snap.sim_state == "restarting"):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{unit}: wanted {state}, still {snap.sim_state} ({snap.active}/{snap.sub})")
            await asyncio.sleep(0.02)

    def state(self, unit: str) -> UnitSnapshot:
        u = self.units[unit]
        return UnitSnapshot(
            name=u.name, active=u.active, sub=u.sub, result=u.result, main_pid=u.main_pid, n_restarts=u.n_restarts,
            invocation_id=u.invocation if u.active not in ("inactive", "failed") else "",
            sim_state=self._sim_state(u), need_daemon_reload=u.need_reload, worker_pids=list(u.child_pids),
            load_state="loaded" if u.loaded else "not-found",
        )  # fmt: skip

    def set_live(self, unit: str, **changes: object) -> None:
        """Change the running fake vLLM of ``unit`` now: ``hung``, ``health_status`` (503…; None: normal), ``die``,
        ``chat_content`` / ``chat_delay_s`` (what a structured chat answers, and after how long)."""
        path = self.root / "var/lib/inferbot-sim" / f"{unit}.json.live"
        data = json.loads(path.read_text()) if path.exists() else {}
        data.pop("die", None)  # a one-off, not a state
        data.update(changes)
        _write_atomic(path, json.dumps(data))

    def log_line(self, unit: str, text: str) -> None:
        """One line in ``unit``'s journal as its main process would write it (what a request log can carry)."""
        u = self.units[unit]
        self._jwrite(_now_us(), u.invocation, u.name, f"vllm[{u.main_pid}]", text)

    def set_hung_systemctl(self, hung: bool) -> None:
        self._flag("hung_systemctl", hung)

    def set_sudo_allowed(self, allowed: bool) -> None:
        self._flag("sudo_allowed", allowed)

    def leftover_pids(self) -> list[int]:
        return [h.pid for h in self.holders.values() if self.units[h.unit].invocation != h.run or
                not self.units[h.unit].main_pid]  # fmt: skip

    def kill_leftovers(self) -> None:
        for pid in self.leftover_pids():
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def journal_path(self) -> Path:
        return self.state_dir / "journal.tsv"

    def rotate_journal(self) -> Path:
        """``journalctl --rotate``: the active journal file is archived (``journal@<first seqnum>.tsv``) and a new
        one started; sequence numbers go on. Returns the archive."""
        archive = self.state_dir / f"journal@{self._jfirst:012d}.tsv"
        if self._jfh is not None:
            self._jfh.close()
            self._jfh = None
        self.journal_path().rename(archive)
        self._jfirst += self._jlines
        self._jlines = 0
        self._open_journal()
        return archive

    def vacuum_journal(self, keep: int = 0) -> list[Path]:
        """``journalctl --vacuum-files``: delete the oldest archived journal files, keeping ``keep``; returns them."""
        archives = sorted(self.state_dir.glob("journal@*.tsv"))
        gone = archives[: max(0, len(archives) - keep)]
        for p in gone:
            p.unlink()
        return gone

    def _open_journal(self) -> None:
        st = self.state_dir
        for name in ("journal.id", "boot_id"):  # journald's seqnum id and the boot id, fixed for the node's life
            if not (st / name).exists():
                _write_atomic(st / name, os.urandom(16).hex() + "\n")
        if self._jfh is None and not self._started:  # a node started again on the same root goes on counting
            with contextlib.suppress(OSError, ValueError):
                self._jfirst = int((st / "journal.first").read_text().strip())
        path = self.journal_path()
        self._jlines = sum(1 for _ in path.open("rb")) if path.exists() else 0
        self._jfh = _open_append(path)
        _write_atomic(st / "journal.first", f"{self._jfirst}\n")
        # Each entry keeps the boot it was written in (its cursor names it): where each boot's entries begin.
        boot = (st / "boot_id").read_text().strip()
        boots = (st / "boots.tsv").read_text().splitlines() if (st / "boots.tsv").exists() else []
        if not boots or boots[-1].partition("\t")[2] != boot:
            boots.append(f"{self._jfirst + self._jlines}\t{boot}")
            _write_atomic(st / "boots.tsv", "".join(x + "\n" for x in boots))

    def next_boot(self) -> None:
        """A new boot id for a stopped node's disk: a ``SimNode`` started on this root next is the node rebooted
        (the journal goes on; its entries from now on carry the new boot id)."""
        _write_atomic(self.state_dir / "boot_id", os.urandom(16).hex() + "\n")

    # ------------------------------------------------------------------------------------------------------
    # files

    def _flag(self, name: str, on: bool) -> None:
        p = self.state_dir / name
        if on:
            p.touch()
            os.chmod(p, 0o644)
        else:
            with contextlib.suppress(FileNotFoundError):
                p.unlink()

    def _write_tree(self) -> None:
        r = self.root
        for d in ("etc/systemd/system", "etc/vllm", "opt/vllm/venv/bin", "usr/bin", "state/units", "run",
                  "var/log/vllm", "var/lib/inferbot-sim", "sim/bin"):  # fmt: skip
            (r / d).mkdir(parents=True, exist_ok=True)
        for src in BIN_SRC.iterdir():
            if src.is_file() and not src.name.startswith("."):
                dst = self.bin / src.name
                shutil.copyfile(src, dst)
                os.chmod(dst, 0o755)
        py = r / "opt/vllm/venv/bin/python3"
        if not py.exists():
            py.symlink_to(sys.executable)
        paths = [str(REPO_ROOT)] + [p for p in sys.path if p and "site-packages" in p]
        script = (
            f"#!{py}\n# -*- coding: utf-8 -*-\nimport re\nimport sys\n"
            f"sys.path[:0] = {paths!r}\n"
            "from services.sim.fake_vllm import main\n"
            "if __name__ == '__main__':\n"
            "    sys.argv[0] = re.sub(r'(-script\\.pyw|\\.exe)?$', '', sys.argv[0])\n"
            "    sys.exit(main())\n"
        )
        write_vllm_package(r / "opt/vllm/venv", self.sc.units[0].profile.version if self.sc.units else "0.20.1")
        for target in (r / "opt/vllm/venv/bin/vllm", r / "usr/bin/docker", r / "opt/serve_model.py",
                       r / "opt/bin/serve-model"):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(script)
            os.chmod(target, 0o755)
        # Launchers that are not vLLM's own (services/sim/launchers.py): a Python launcher that starts
        # the server as a child, one that runs it in-process with arguments from a file, and wrappers
        # that exec (numactl, taskset) or stay as the parent (uv run, conda run).
        header = f"#!{py}\nimport sys\nsys.path[:0] = {paths!r}\n"
        for name, target in (("launch", r / "opt/launch.py"), ("model_server", r / "opt/model_server.py"),
                             ("numactl", r / "usr/bin/numactl"), ("taskset", r / "usr/bin/taskset"),
                             ("uv", r / "usr/local/bin/uv"), ("conda", r / "opt/conda/bin/conda")):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(header + f"from services.sim.launchers import {name}\nsys.exit({name}())\n")
            os.chmod(target, 0o755)
        sc = self.sc
        (self.state_dir / "hostname").write_text(sc.hostname + "\n")
        self._flag("sudo_allowed", sc.sudo_allowed)
        self._flag("polkit_allows_user", sc.polkit_allows_user)
        self._flag("journal_restricted", not sc.journal_readable)
        self._flag("hung_systemctl", sc.hung_systemctl)
        self._flag("nvidia_smi_broken", sc.nvidia_smi_broken)
        (self.state_dir / "notfound.show").write_text(self._show_text(None, "@UNIT@"))
        bench_dir = Path(self.bench_dir)
        if sc.bench_files:
            bench_dir.mkdir(parents=True, exist_ok=True)
            base = time.time() - 86400 * 10
            for i, (name, content) in enumerate(sorted(sc.bench_files.items())):
                f = bench_dir / name
                f.write_text(content)
                # mtimes follow the date stamp in the name, so `ls -t` orders them as they were written
                stamp = name.rsplit("-", 2)[-2:]
                try:
                    t = time.mktime(time.strptime("".join(stamp)[:14], "%Y%m%d%H%M%S"))
                except ValueError:
                    t = base + i
                os.utime(f, (t, t))
        for u in self.units.values():
            us = u.sc
            u.fragment.write_text(sc.render(us.text, r, us.port))
            if us.drop_ins:
                dropin_dir = self.unit_dir / (u.name + ".d")
                dropin_dir.mkdir(exist_ok=True)
                for fname, text in us.drop_ins.items():
                    (dropin_dir / fname).write_text(sc.render(text, r, us.port))
            for path_t, content in {**us.files, **us.env_files}.items():
                env_path = Path(sc.render(path_t, r, us.port))
                env_path.parent.mkdir(parents=True, exist_ok=True)
                env_path.write_text(sc.render(content, r, us.port) if path_t in us.files else content)
            gpus = us.gpu_indices or list(range(sc.gpus.count))
            profile = us.profile.model_copy(update={"gpu_total_mib": sc.gpus.memory_total_mib,
                                                    "gpu_uuids": [self._gpu_uuid(i) for i in gpus]})
            (r / "var/lib/inferbot-sim" / f"{u.name}.json").write_text(profile.model_dump_json())
            (self.state_dir / "units" / u.name).mkdir(exist_ok=True)
        for st in sc.static_units:
            (self.state_dir / "units" / st.name).mkdir(exist_ok=True)
            (self.state_dir / "units" / st.name / "show").write_text(self._static_show(st))
        self._fix_perms()

    def _fix_perms(self) -> None:
        """dirs 0755, files 0644 (executables 0755), env files as the scenario says; parents traversable."""
        env_modes: dict[Path, int] = {}
        for u in self.units.values():
            for path_t in u.sc.env_files:
                env_modes[Path(self.sc.render(path_t, self.root))] = u.sc.env_file_mode
        for dirpath, _dirnames, filenames in os.walk(self.root):
            os.chmod(dirpath, 0o755)
            for fn in filenames:
                p = Path(dirpath) / fn
                if p.is_symlink() or p.is_socket():
                    continue
                mode = p.stat().st_mode
                os.chmod(p, env_modes.get(p, 0o755 if mode & stat.S_IXUSR else 0o644))
        if self.run_as:
            # The login user must reach the root and the interpreter (o+x only, nothing listed).
            targets = [self.root, Path(os.path.realpath(sys.executable)), REPO_ROOT]
            for t in targets:
                for parent in [t, *t.parents]:
                    with contextlib.suppress(OSError):
                        m = parent.stat().st_mode
                        if stat.S_ISDIR(m) and not m & stat.S_IXOTH:
                            os.chmod(parent, m | stat.S_IXOTH)

    def _load(self, u: _Unit) -> None:
        try:
            u.loaded = load_unit(u.name, u.fragment) if u.fragment.exists() else None
        except (OSError, ValueError):
            u.loaded = None
        u.mtimes = self._mtimes(u)

    def _mtimes(self, u: _Unit) -> dict[str, float]:
        """What systemd compares to say NeedDaemonReload=yes: the fragment and the drop-in directory."""
        out: dict[str, float] = {}
        d = Path(str(u.fragment) + ".d")
        for p in [u.fragment, d, *(sorted(d.glob("*.conf")) if d.is_dir() else [])]:
            with contextlib.suppress(OSError):
                out[str(p)] = p.stat().st_mtime
        return out

    def _check_changed_on_disk(self) -> None:
        for u in self.units.values():
            if not u.need_reload and self._mtimes(u) != u.mtimes:
                u.need_reload = True
                self._render_unit(u)

    # ------------------------------------------------------------------------------------------------------
    # rendering

    def _show_text(self, u: _Unit | None, name: str) -> str:
        lu = u.loaded if u else None
        lines: list[tuple[str, str]] = []

        def add(k: str, v: object) -> None:
            lines.append((k, str(v)))

        if u is None or lu is None:
            # systemd answers for any name: a not-found stub, rc 0
            for k, v in (("Type", "simple"), ("Restart", "no"), ("MainPID", 0), ("ControlPID", 0),
                         ("Result", "success"), ("NRestarts", 0), ("ExecMainStartTimestamp", ""),
                         ("ExecMainPID", 0), ("ExecMainCode", 0), ("ExecMainStatus", 0), ("Environment", ""),
                         ("Id", name), ("Names", name), ("Description", name), ("LoadState", "not-found"),
                         ("ActiveState", "inactive"), ("SubState", "dead"), ("FragmentPath", ""),
                         ("DropInPaths", ""), ("UnitFileState", ""), ("StateChangeTimestamp", ""),
                         ("InactiveExitTimestamp", ""), ("ActiveEnterTimestamp", ""), ("ActiveExitTimestamp", ""),
                         ("InactiveEnterTimestamp", ""), ("NeedDaemonReload", "no"), ("InvocationID", "")):  # fmt: skip
                add(k, v)
            return "".join(f"{k}={v}\n" for k, v in lines)
        add("Type", "simple")
        add("Restart", lu.restart)
        add("NotifyAccess", "none")
        add("RestartUSec", _usec(lu.restart_sec))
        add("TimeoutStopUSec", _usec(lu.timeout_stop_s if lu.timeout_stop_s is not None else 90))
        add("MainPID", u.main_pid)
        add("ControlPID", u.control_pid)
        add("Result", u.result)
        add("NRestarts", u.n_restarts)
        add("ExecMainStartTimestamp", fmt_ts(u.exec_main.start_us))
        add("ExecMainExitTimestamp", fmt_ts(u.exec_main.stop_us))
        add("ExecMainPID", u.exec_main.pid)
        add("ExecMainCode", {"(null)": 0, "exited": 1, "killed": 2}[u.exec_main.code])
        add("ExecMainStatus", u.exec_main.status)
        for i, pre in enumerate(lu.exec_start_pre):
            st = u.exec_pre[i] if i < len(u.exec_pre) else ExecStatus()
            add("ExecStartPre", _exec_prop(pre, st))
        if lu.exec_start:
            add("ExecStart", _exec_prop(lu.exec_start, u.exec_main))
        add("ControlGroup", f"/system.slice/{u.name}" if u.active != "inactive" else "")
        add("Environment", " ".join(shell_maybe_quote(f"{k}={v}") for k, v in lu.environment.items()))
        for path, optional in lu.environment_files:
            add("EnvironmentFiles", f"{path} (ignore_errors={'yes' if optional else 'no'})")
        add("WorkingDirectory", lu.working_directory)
        add("User", lu.user)
        add("KillMode", lu.kill_mode)
        add("Id", u.name)
        add("Names", u.name)
        add("Description", lu.description or u.name)
        add("LoadState", "loaded")
        add("ActiveState", u.active)
        add("FreezerState", "running")
        add("SubState", u.sub)
        add("FragmentPath", str(lu.fragment))
        add("DropInPaths", " ".join(str(p) for p in lu.drop_ins))
        add("UnitFileState", "enabled" if u.sc.enabled else "disabled")
        add("UnitFilePreset", "enabled")
        add("StateChangeTimestamp", fmt_ts(u.state_change_us))
        add("InactiveExitTimestamp", fmt_ts(u.inactive_exit_us))
        add("ActiveEnterTimestamp", fmt_ts(u.active_enter_us))
        add("ActiveExitTimestamp", fmt_ts(u.active_exit_us))
        add("InactiveEnterTimestamp", fmt_ts(u.inactive_enter_us))
        add("NeedDaemonReload", "yes" if u.need_reload else "no")
        add("StartLimitIntervalUSec", _usec(lu.start_limit_interval_s))
        add("StartLimitBurst", lu.start_limit_burst)
        add("InvocationID", u.invocation if u.active not in ("inactive", "failed") else "")
        return "".join(f"{k}={v}\n" for k, v in lines)

    def _static_show(self, st: StaticUnit) -> str:
        exe = st.exec_start.split()[0]
        start = fmt_ts(_now_us() - 86400 * 3 * 1_000_000)
        pid = 4_194_400 + sum(map(ord, st.name)) % 200  # above PID_MAX_LIMIT: no real process has it
        inv = hashlib.md5(st.name.encode()).hexdigest()
        return "".join(f"{k}={v}\n" for k, v in (
            ("Type", "simple"), ("MainPID", pid if st.active else 0), ("Result", "success"), ("NRestarts", 0),
            ("ExecMainStartTimestamp", start), ("ExecMainStatus", 0),
            ("ExecStart", f"{{ path={exe} ; argv[]={st.exec_start} ; ignore_errors=no ; start_time=[{start}] ; "
                          f"stop_time=[n/a] ; pid={pid} ; code=(null) ; status=0/0 }}"),
            ("Environment", ""), ("Id", st.name), ("Names", st.name), ("Description", st.description),
            ("LoadState", "loaded"), ("ActiveState", "active" if st.active else "inactive"),
            ("SubState", "running" if st.active else "dead"), ("FragmentPath", f"/lib/systemd/system/{st.name}"),
            ("DropInPaths", ""), ("UnitFileState", "enabled"), ("StateChangeTimestamp", start),
            ("ActiveEnterTimestamp", start), ("InactiveEnterTimestamp", ""), ("NeedDaemonReload", "no"),
            ("InvocationID", inv if st.active else ""),
        ))  # fmt: skip

    def _status_text(self, u: _Unit) -> tuple[str, int]:
        """``systemctl status`` without the journal tail; ``@AGO@`` is filled in by the script."""
        lu = u.loaded
        if lu is None:
            return "", 0
        sym = {"active": "●", "activating": "●", "deactivating": "●", "failed": "×"}.get(u.active, "○")
        out = []
        if u.need_reload:
            out.append(f"Warning: The unit file, source configuration file or drop-ins of {u.name} changed on disk. "
                       "Run 'systemctl daemon-reload' to reload units.")  # fmt: skip
        out.append(f"{sym} {u.name} - {lu.description or u.name}")
        state = "enabled" if u.sc.enabled else "disabled"
        out.append(f"     Loaded: loaded ({lu.fragment}; {state}; preset: enabled)")
        if lu.drop_ins:
            out.append(f"    Drop-In: {lu.drop_ins[0].parent}")
            out.extend(f"             └─{p.name}" for p in lu.drop_ins)
        since_us = u.state_change_us
        if u.active == "inactive" and u.sub == "dead":
            active = "inactive (dead)"
        elif u.active == "failed":
            active = f"failed (Result: {u.result})"
        elif u.sub == "auto-restart":
            active = f"activating (auto-restart) (Result: {u.result})"
        else:
            active = f"{u.active} ({u.sub})"
            if u.active == "active":
                since_us = u.active_enter_us
        if since_us and not (u.active == "inactive" and not u.inactive_enter_us):
            out.append(f"     Active: {active} since {fmt_ts(since_us)}; @AGO@")
        else:
            out.append(f"     Active: {active}")
        for pre, st in zip(lu.exec_start_pre, u.exec_pre, strict=False):
            if st.code != "(null)":
                out.append(f"    Process: {st.pid} ExecStartPre={' '.join(pre.display_argv)} ({st.human()})")
        if u.control_pid:
            cname = Path(u.control_cmd.path).name if u.control_cmd else "sh"
            out.append(f"  Cntrl PID: {u.control_pid} ({cname})")
        if u.main_pid:
            out.append(f"   Main PID: {u.main_pid} ({Path(lu.exec_start.path).name if lu.exec_start else 'sh'})")
            out.append(f"      Tasks: {40 + 12 * len(u.child_pids)} (limit: 629145)")
            out.append(f"     Memory: {3.1 + 0.4 * len(u.child_pids):.1f}G")
            out.append(f"     CGroup: /system.slice/{u.name}")
            procs = [(u.main_pid, _cmdline(u.main_pid))] + [(p, _cmdline(p)) for p in u.child_pids if _alive(p)]
            for i, (pid, cmd) in enumerate(procs):
                out.append(f"             {'└─' if i == len(procs) - 1 else '├─'}{pid} {cmd}")
        elif u.exec_main.code != "(null)" and lu.exec_start:
            out.append(f"    Process: {u.exec_main.pid} ExecStart={' '.join(lu.exec_start.display_argv)} "
                       f"({u.exec_main.human()})")  # fmt: skip
            out.append(f"   Main PID: {u.exec_main.pid} ({u.exec_main.human()})")
        return "\n".join(out) + "\n", since_us // 1_000_000

    def _render_unit(self, u: _Unit) -> None:
        d = self.state_dir / "units" / u.name
        d.mkdir(exist_ok=True)
        show = self._show_text(u, u.name)
        _write_atomic(d / "show", show)
        # The one property `systemctl cat` needs, on its own (the fake reads it without a process).
        _write_atomic(d / "need_reload", "yes\n" if "\nNeedDaemonReload=yes\n" in f"\n{show}" else "no\n")
        status, since = self._status_text(u)
        _write_atomic(d / "status", status)
        _write_atomic(d / "since", f"{since}\n")
        paths = [str(p) for p in u.loaded.paths] if u.loaded else []
        if not u.loaded and u.fragment.exists():
            paths = [str(u.fragment)]
        _write_atomic(d / "paths", "".join(p + "\n" for p in paths))
        self._render_lists()

    def _render_lists(self) -> None:
        rows_all: list[tuple[str, str, str, str, str]] = []
        for u in self.units.values():
            if u.loaded is None:
                continue
            rows_all.append((u.name, "loaded", u.active, u.sub, u.loaded.description or u.name))
        for st in self.sc.static_units:
            rows_all.append((st.name, "loaded", "active" if st.active else "inactive",
                             "running" if st.active else "dead", st.description))  # fmt: skip
        rows_all.sort()
        rows_active = [r for r in rows_all if r[2] != "inactive"]
        _write_atomic(self.state_dir / "list-units.all", _columns(rows_all))
        _write_atomic(self.state_dir / "list-units", _columns(rows_active))
        files: dict[str, tuple[str, str, str]] = {}
        for u in self.units.values():
            fname = u.fragment.name
            if u.fragment.exists():
                state = ("indirect" if "@." in fname else "enabled") if u.sc.enabled else "disabled"
                files[fname] = (fname, state, "enabled")
        for st in self.sc.static_units:
            files[st.name] = (st.name, "enabled", "enabled")
        _write_atomic(self.state_dir / "list-unit-files", _columns(sorted(files.values())))

    def _render_all(self) -> None:
        for u in self.units.values():
            self._render_unit(u)
        self._render_gpus()

    def _render_gpus(self) -> None:
        g = self.sc.gpus
        now = time.monotonic()
        self.ghosts = [x for x in self.ghosts if x[0] > now]
        header = ["index", "name", "uuid", "pci.bus_id", "memory.total", "memory.used", "memory.free",
                  "utilization.gpu", "utilization.memory", "temperature.gpu", "power.draw", "power.limit",
                  "driver_version", "pstate", "fan.speed", "persistence_mode"]  # fmt: skip
        rows = ["\t".join(header)]
        apps = ["\t".join(["pid", "process_name", "used_memory", "gpu_uuid", "gpu_bus_id", "gpu_name"])]
        for i in range(g.count):
            uuid = self._gpu_uuid(i)
            bus = f"00000000:{g.pci_bus_start + i * 0x10:02X}:00.0"
            used = float(g.idle_used_mib)
            busy = 0.0
            for h in self.holders.values():
                if h.gpu != i:
                    continue
                used += h.mib
                apps.append("\t".join([str(h.pid), h.name, str(round(h.mib)), uuid, bus, g.name]))
                busy = max(busy, self._gpu_busy(h))
            used += sum(m for _, gi, m in self.ghosts if gi == i)
            used = min(used, g.memory_total_mib)
            frac = used / g.memory_total_mib
            jitter = (hash((i, int(time.time() * 2))) % 7) - 3
            util = 0 if busy == 0 else max(0, min(100, int(busy + jitter)))
            temp = int(31 + util * 0.45 + frac * 6 + (i % 3))
            power = g.idle_power_w + (g.power_limit_w - g.idle_power_w) * (util / 100) * 0.75 + frac * 35
            rows.append("\t".join([str(i), g.name, uuid, bus, str(g.memory_total_mib), str(round(used)),
                                   str(g.memory_total_mib - round(used)), str(util), str(util // 2), str(temp),
                                   f"{power:.2f}", f"{g.power_limit_w:.2f}", "580.95.05",
                                   "P0" if used > 1000 else "P8", "30" if util < 50 else "65", "Enabled"]))  # fmt: skip
        _write_atomic(self.state_dir / "gpus.tsv", "\n".join(rows) + "\n")
        _write_atomic(self.state_dir / "apps.tsv", "\n".join(apps) + "\n")

    def _gpu_busy(self, h: Holder) -> float:
        u = self.units.get(h.unit)
        if u is None or u.invocation != h.run or not u.main_pid:
            return 0.0  # leftovers hold memory but do no work
        p = u.sc.profile
        if u.phase == "ready":
            if p.hung:
                return 100.0
            return 92.0 if p.traffic_tps > 0 else 0.0
        if u.phase == "loading":
            return 3.0
        return 0.0

    def _gpu_uuid(self, i: int) -> str:
        h = hashlib.sha1(f"{self.sc.hostname}/{i}".encode()).hexdigest()
        return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.sc.tick_s)
            self._reap_holders()
            self._render_gpus()
            self._check_changed_on_disk()

    def _reap_holders(self) -> None:
        delay = self.sc.gpu_free_delay_s
        for pid, h in list(self.holders.items()):
            if not _alive(pid):
                del self.holders[pid]
                if h.mib > 0:
                    self.ghosts.append((time.monotonic() + delay, h.gpu, h.mib))

    # ------------------------------------------------------------------------------------------------------
    # journal

    def _jwrite(self, t_us: int, inv: str, unit: str, ident: str, msg: str) -> None:
        if self._jfh is None:
            return
        msg = msg.replace("\t", " ").replace("\n", " ")
        self._jfh.write(f"{t_us}\t{inv}\t{unit}\t{ident}\t{msg}\n")
        self._jfh.flush()
        self._jlines += 1

    def _sys(self, u: _Unit, msg: str, *, prefix: bool = True, t_us: int | None = None) -> None:
        self._jwrite(t_us or _now_us(), "", u.name, "systemd[1]", f"{u.name}: {msg}" if prefix else msg)

    # ------------------------------------------------------------------------------------------------------
    # control server

    async def _start_control(self) -> None:
        app = web.Application()
        app.router.add_post("/unit/{verb}/{unit}", self._h_unit)
        app.router.add_post("/unit/{verb}/", self._h_unit)
        app.router.add_post("/daemon-reload", self._h_reload)
        app.router.add_get("/read", self._h_read)
        app.router.add_post("/privileged", self._h_privileged)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        with contextlib.suppress(FileNotFoundError):
            self.sock_path.unlink()
        await web.UnixSite(self._runner, str(self.sock_path)).start()
        os.chmod(self.sock_path, 0o666)

    async def _h_unit(self, request: web.Request) -> web.Response:
        verb = request.match_info["verb"]
        unit = request.match_info.get("unit", "")
        res = await self._verb(verb, unit, signal_name=request.query.get("signal", ""))
        return web.Response(text=f"{res.rc}\n{res.message}")

    async def _h_reload(self, request: web.Request) -> web.Response:
        await self.daemon_reload()
        return web.Response(text="0\n")

    async def _h_read(self, request: web.Request) -> web.Response:
        """Privileged read for the fake ``sudo`` (files under the root or in /proc)."""
        path = await asyncio.to_thread(os.path.realpath, request.query.get("path", ""))
        if not (path.startswith(str(self.root) + "/") or path.startswith("/proc/")):
            return web.Response(status=403)
        try:
            data = await asyncio.to_thread(Path(path).read_bytes)
        except OSError as exc:
            return web.Response(status=404, text=str(exc))
        return web.Response(body=data)

    async def _h_privileged(self, request: web.Request) -> web.Response:
        """``sudo install|mv|rm …`` for the fake ``sudo``: the argv as root, only on files under the root."""
        argv = request.query.getall("a", [])
        data = await request.read()
        under = str(self.root) + "/"
        paths = [a for a in argv[1:] if a.startswith("/") and a != "/dev/stdin"]
        real = [await asyncio.to_thread(os.path.realpath, p) for p in paths]
        if not argv or argv[0] not in ("install", "mv", "rm") or not paths or \
                any(not p.startswith(under) for p in real):
            return web.Response(text="1\nsudo: the simulated node runs only install, mv and rm under its root")
        proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        _, err = await proc.communicate(data)
        return web.Response(text=f"{proc.returncode}\n{err.decode(errors='replace')}")

    # ------------------------------------------------------------------------------------------------------
    # unit lifecycle

    async def _verb(self, verb: str, unit: str, signal_name: str = "") -> JobResult:
        if verb == "daemon-reload":
            await self.daemon_reload()
            return JobResult(0)
        u = self.units.get(unit)
        if verb == "reset-failed" and not unit:
            for x in self.units.values():
                self._reset_failed(x)
            return JobResult(0)
        if u is None or u.loaded is None:
            if verb in ("stop", "kill", "reset-failed"):
                return JobResult(5, f"Failed to {verb} {unit}: Unit {unit} not loaded.")
            return JobResult(5, f"Failed to {verb} {unit}: Unit {unit} not found.")
        async with u.lock:
            if verb == "start":
                if u.active in ("active", "activating") and u.sub != "auto-restart":
                    return JobResult(0)
                return await self._do_start(u, manual=True)
            if verb == "stop":
                await self._do_stop(u)
                return JobResult(0)
            if verb in ("restart", "try-restart", "reload-or-restart", "force-reload"):
                if verb == "try-restart" and u.active not in ("active", "activating"):
                    return JobResult(0)
                await self._do_stop(u, restarting=True)
                return await self._do_start(u, manual=True)
            if verb == "reset-failed":
                self._reset_failed(u)
                return JobResult(0)
            if verb == "kill":
                sig = getattr(signal, "SIG" + signal_name.upper().removeprefix("SIG"), signal.SIGTERM) \
                    if signal_name else signal.SIGTERM
                pgids = list(u.pgids)
                for pg in pgids:
                    with contextlib.suppress(OSError):
                        os.killpg(pg, sig)
                return JobResult(0)
        return JobResult(1, f"Unknown command verb {verb}.")

    def _reset_failed(self, u: _Unit) -> None:
        u.start_times.clear()
        if u.active == "failed":
            u.result = "success"
            self._set_state(u, "inactive", "dead")

    def _sim_state(self, u: _Unit) -> SimState:
        if u.active == "inactive":
            return "stopped"
        if u.active == "failed":
            return "failed"
        if u.active == "deactivating":
            return "stopping"
        if u.active == "activating":
            return "restarting" if u.sub == "auto-restart" else "starting"
        if u.phase == "ready":
            return "ready"
        if u.phase == "engine_dead":
            return "unhealthy"
        if u.phase == "failed":
            return "failed"
        return "loading"

    def _set_state(self, u: _Unit, active: str, sub: str, t_us: int | None = None) -> None:
        t = t_us or _now_us()
        was_active = u.active
        if active == "active" and was_active != "active":
            u.active_enter_us = t
        if was_active == "active" and active != "active":
            u.active_exit_us = t
        if active in ("inactive", "failed") and was_active not in ("inactive", "failed"):
            u.inactive_enter_us = t
        if was_active in ("inactive", "failed") and active not in ("inactive", "failed"):
            u.inactive_exit_us = t
        u.active, u.sub = active, sub
        u.state_change_us = t
        if self._started:
            self._render_unit(u)

    def _allow_start(self, u: _Unit) -> bool:
        lu = u.loaded
        assert lu is not None
        if lu.start_limit_interval_s <= 0 or lu.start_limit_burst <= 0:
            return True
        now = time.monotonic()
        u.start_times = [t for t in u.start_times if now - t < lu.start_limit_interval_s]
        if len(u.start_times) >= lu.start_limit_burst:
            return False
        u.start_times.append(now)
        return True

    async def _do_start(self, u: _Unit, *, manual: bool) -> JobResult:
        if u.task and not u.task.done():
            # an auto-restart is pending: a manual start replaces it
            u.task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await u.task
        if manual:
            u.n_restarts = 0
        u.stopping = False
        fut: asyncio.Future[JobResult] = asyncio.get_running_loop().create_future()
        backdate = u.sc.profile.started_ago_s if u.first_start else 0.0
        u.first_start = False
        u.task = asyncio.create_task(self._lifecycle(u, fut, backdate))
        return await fut

    async def _lifecycle(self, u: _Unit, fut: asyncio.Future[JobResult], backdate: float) -> None:
        lu = u.loaded
        assert lu is not None

        def resolve(res: JobResult) -> None:
            if not fut.done():
                fut.set_result(res)

        try:
            while True:
                desc = lu.description or u.name
                if not self._allow_start(u):
                    self._sys(u, "Start request repeated too quickly.")
                    self._sys(u, "Failed with result 'start-limit-hit'.")
                    self._sys(u, f"Failed to start {desc}.", prefix=False)
                    u.result = "start-limit-hit"
                    u.invocation = ""
                    self._set_state(u, "failed", "failed")
                    resolve(JobResult(1, f"Job for {u.name} failed because start of the service was attempted "
                                         f"too often.\nSee \"systemctl status {u.name}\" and \"journalctl -xeu "
                                         f"{u.name}\" for details.\nTo force a start use \"systemctl reset-failed "
                                         f"{u.name}\"\nfollowed by \"systemctl start {u.name}\" again."))  # fmt: skip
                    return
                ok = await self._start_once(u, lu, backdate)
                backdate = 0.0
                if not ok:
                    resolve(JobResult(1, f"Job for {u.name} failed because the control process exited with error "
                                         f"code.\nSee \"systemctl status {u.name}\" and \"journalctl -xeu {u.name}\" "
                                         "for details."))  # fmt: skip
                    if not await self._after_failure(u, lu):
                        return
                    continue
                resolve(JobResult(0))
                await self._wait_main(u, lu)
                if u.stopping:
                    return
                if u.result == "success":
                    u.invocation = ""
                    self._sys(u, "Deactivated successfully.")
                    self._set_state(u, "inactive", "dead")
                    return
                if not await self._after_failure(u, lu):
                    return
        except asyncio.CancelledError:
            resolve(JobResult(1, f"Job for {u.name} canceled."))
            raise

    async def _after_failure(self, u: _Unit, lu: LoadedUnit) -> bool:
        """Restart= policy after a failed start or main exit; True to start again."""
        restart = lu.restart in ("always", "on-failure") or (
            lu.restart == "on-abnormal" and u.result in ("signal", "timeout", "core-dump"))
        if not restart:
            self._set_state(u, "failed", "failed")
            return False
        self._set_state(u, "activating", "auto-restart")
        await asyncio.sleep(lu.restart_sec)
        u.n_restarts += 1
        self._sys(u, f"Scheduled restart job, restart counter is at {u.n_restarts}.")
        self._sys(u, f"Stopped {lu.description or u.name}.", prefix=False)
        return True

    def _base_env(self, u: _Unit, lu: LoadedUnit) -> dict[str, str]:
        env = {"LANG": "C.UTF-8", "PATH": f"{self.bin}:{DEFAULT_PATH}", "INVOCATION_ID": u.invocation,
               "JOURNAL_STREAM": f"8:{20000 + len(u.name) * 97}", "SYSTEMD_EXEC_PID": "0"}  # fmt: skip
        if lu.user:
            try:
                pw = pwd.getpwnam(lu.user)
                env.update(HOME=pw.pw_dir, LOGNAME=lu.user, USER=lu.user, SHELL=pw.pw_shell)
            except KeyError:
                pass
        env.update(lu.file_environment())
        env["INFERBOT_SIM_ROOT"] = str(self.root)
        env["INFERBOT_SIM_PROFILE"] = str(self.root / "var/lib/inferbot-sim" / f"{u.name}.json")
        env["INFERBOT_SIM_SIDEBAND"] = "1"
        return env

    async def _spawn(self, u: _Unit, lu: LoadedUnit, cmd: ExecLine, env: dict[str, str]) -> asyncio.subprocess.Process:
        argv = cmd.argv(env, lu.specifiers)
        if not argv:
            raise OSError(2, "empty command")
        cwd = _existing_dir(lu.working_directory)
        kwargs: dict[str, object] = {}
        if self._uid is not None and not self.sc.root_only_proc:
            kwargs.update(user=self._uid, group=self._gid, extra_groups=[])
        proc = await asyncio.create_subprocess_exec(
            argv[0], *argv[1:], executable=cmd.path, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env, cwd=cwd,
            start_new_session=True, limit=1 << 20, **kwargs,  # type: ignore[arg-type]
        )  # fmt: skip
        u.pgids.add(proc.pid)
        self._all_pgids.add(proc.pid)
        self._known_pids.add(proc.pid)
        return proc

    async def _start_once(self, u: _Unit, lu: LoadedUnit, backdate: float) -> bool:
        """Run ExecStartPre= commands, then fork ExecStart=; False when the start failed."""
        t0 = _now_us() - int(backdate * 1_000_000)
        u.invocation = os.urandom(16).hex()
        u.phase = ""
        u.child_pids = []
        u.exec_pre = [ExecStatus() for _ in lu.exec_start_pre]
        u.exec_main = ExecStatus()
        u.result = "success"
        desc = lu.description or u.name
        self._sys(u, f"Starting {desc}...", prefix=False, t_us=t0)
        env = self._base_env(u, lu)
        if lu.exec_start_pre:
            self._set_state(u, "activating", "start-pre", t0)
        for i, pre in enumerate(lu.exec_start_pre):
            st = u.exec_pre[i]
            st.start_us = _now_us()
            try:
                proc = await self._spawn(u, lu, pre, env)
            except OSError as exc:
                self._sys(u, f"Failed to execute {pre.path}: {exc.strerror}")
                st.code, st.status, st.stop_us = "exited", 203, _now_us()
                rc = 203
            else:
                u.control_pid, u.control_cmd, st.pid = proc.pid, pre, proc.pid
                self._render_unit(u)
                pump = self._pump(u, proc, Path(pre.path).name, to_file=None)
                rc = await proc.wait()
                await pump
                u.control_pid, u.control_cmd = 0, None
                st.stop_us = _now_us()
                if rc < 0:
                    st.code, st.status = "killed", -rc
                else:
                    st.code, st.status = "exited", rc
            if u.stopping:
                return False
            if rc != 0 and not pre.ignore_errors:
                what = f"code=exited, status={rc}/{_EXIT_STATUS_NAMES.get(rc, str(rc))}" if rc >= 0 else \
                    f"code=killed, status={-rc}/{_signame(-rc)}"
                self._sys(u, f"Control process exited, {what}")
                self._sys(u, "Failed with result 'exit-code'.")
                self._sys(u, f"Failed to start {desc}.", prefix=False)
                u.result = "exit-code"
                u.invocation = ""
                self._set_state(u, "failed", "failed")
                return False
        if lu.exec_start is None:
            self._sys(u, "Service has no ExecStart=, ExecStop=, or SuccessAction=. Refusing.")
            u.result = "resources"
            self._set_state(u, "failed", "failed")
            return False
        start_us = _now_us() - int(backdate * 1_000_000)
        u.exec_main.start_us = start_us
        try:
            proc = await self._spawn(u, lu, lu.exec_start, env)
        except OSError as exc:
            self._sys(u, f"Failed to locate executable {lu.exec_start.path}: {exc.strerror}")
            self._sys(u, f"Failed at step EXEC spawning {lu.exec_start.path}: {exc.strerror}")
            self._sys(u, "Main process exited, code=exited, status=203/EXEC")
            self._sys(u, "Failed with result 'exit-code'.")
            u.exec_main.code, u.exec_main.status, u.exec_main.stop_us = "exited", 203, _now_us()
            u.result = "exit-code"
            u.invocation = ""
            self._set_state(u, "failed", "failed")
            return False
        u.proc = proc
        u.main_pid = u.exec_main.pid = proc.pid
        self._sys(u, f"Started {desc}.", prefix=False, t_us=start_us)
        self._set_state(u, "active", "running", start_us)
        out = lu.standard_output
        to_file = Path(out.split(":", 1)[1]) if out.startswith(("append:", "file:", "truncate:")) else None
        if to_file is not None:
            to_file.parent.mkdir(parents=True, exist_ok=True)
            if out.startswith("truncate:"):
                to_file.write_text("")
        u.pump = self._pump(u, proc, Path(lu.exec_start.path).name, to_file=to_file)
        return True

    def _pump(self, u: _Unit, proc: asyncio.subprocess.Process, ident: str, to_file: Path | None) -> asyncio.Task[None]:
        inv = u.invocation

        async def run() -> None:
            assert proc.stdout is not None
            fh = _open_append(to_file) if to_file else None
            try:
                while True:
                    try:
                        raw = await proc.stdout.readline()
                    except (ValueError, asyncio.LimitOverrunError):
                        continue
                    if not raw:
                        return
                    text = raw.decode("utf-8", "replace").rstrip("\n")
                    if text.startswith("\x1eC "):
                        with contextlib.suppress(ValueError):
                            self._on_control(u, inv, json.loads(text[3:]))
                        continue
                    t_us, pid = _now_us(), proc.pid
                    if text.startswith("\x1eL "):
                        head, _, text = text[3:].partition("\x1f")
                        with contextlib.suppress(ValueError):
                            ts, pid_s = head.split()
                            t_us, pid = int(float(ts) * 1_000_000), int(pid_s)
                    if fh is not None:
                        fh.write(text + "\n")
                        fh.flush()
                    else:
                        self._jwrite(t_us, inv, u.name, f"{ident}[{pid}]", text)
            finally:
                if fh is not None:
                    fh.close()

        task = asyncio.create_task(run())
        self._pumps.add(task)
        task.add_done_callback(self._pumps.discard)
        return task

    def _on_control(self, u: _Unit, inv: str, data: dict[str, object]) -> None:
        gpus = u.sc.gpu_indices or list(range(self.sc.gpus.count))
        holders = data.get("holders")
        if isinstance(holders, list):
            for i, (pid, name) in enumerate(holders):
                if i < len(gpus):
                    self.holders[int(pid)] = Holder(pid=int(pid), name=str(name), gpu=gpus[i], unit=u.name, run=inv)
        children = data.get("workers")
        engine = data.get("engine")
        if isinstance(children, list) and isinstance(engine, int):
            u.child_pids = [engine, *[int(p) for p in children]]
            self._known_pids.update(u.child_pids)
            self._render_unit(u)
        mem = data.get("mem")
        if isinstance(mem, (int, float)):
            for h in self.holders.values():
                if h.unit == u.name and h.run == inv:
                    h.mib = float(mem)
            self._render_gpus()
        phase = data.get("phase")
        if isinstance(phase, str) and u.invocation == inv:
            u.phase = phase
            self._render_unit(u)

    async def _wait_main(self, u: _Unit, lu: LoadedUnit) -> None:
        proc = u.proc
        assert proc is not None
        rc = await proc.wait()
        pump = u.pump
        if pump is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(pump), 1.0)
        st = u.exec_main
        st.stop_us = _now_us()
        st.code, st.status = ("killed", -rc) if rc < 0 else ("exited", rc)
        u.main_pid = 0
        u.proc = None
        if u.stopping:
            return  # _do_stop finishes the bookkeeping
        u.phase = ""
        desc_status = f"code=killed, status={-rc}/{_signame(-rc)}" if rc < 0 else \
            f"code=exited, status={rc}/{_EXIT_STATUS_NAMES.get(rc, str(rc))}"
        if rc != 0:
            self._sys(u, f"Main process exited, {desc_status}")
        # KillMode=control-group: what is left of the cgroup goes with the main process
        if u.leave_workers:
            u.leave_workers = False
            u.pgids.clear()
        else:
            await self._kill_cgroup(u, signal.SIGTERM, wait=1.0)
        u.child_pids = []
        self._reap_holders()
        self._render_gpus()
        u.result = "success" if rc == 0 else ("signal" if rc < 0 else "exit-code")
        if rc != 0:
            self._sys(u, f"Failed with result '{u.result}'.")

    async def _kill_cgroup(self, u: _Unit, sig: int, wait: float) -> None:
        for pg in list(u.pgids):
            with contextlib.suppress(OSError):
                os.killpg(pg, sig)
        for _ in range(max(int(wait / 0.02), 1)):
            if not any(_pg_alive(pg) for pg in u.pgids):
                break
            await asyncio.sleep(0.02)
        for pg in list(u.pgids):
            with contextlib.suppress(OSError):
                os.killpg(pg, signal.SIGKILL)
        u.pgids.clear()

    async def _do_stop(self, u: _Unit, restarting: bool = False) -> None:
        lu = u.loaded
        assert lu is not None
        desc = lu.description or u.name
        if u.active in ("inactive", "failed") and not (u.task and not u.task.done()):
            return
        u.stopping = True
        if u.sub == "auto-restart" or u.sub == "start-pre":
            if u.task and not u.task.done():
                u.task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await u.task
            await self._kill_cgroup(u, signal.SIGTERM, wait=1.0)
            u.control_pid = 0
            u.invocation = ""
            u.result = "success"
            self._sys(u, f"Stopped {desc}.", prefix=False)
            self._set_state(u, "inactive", "dead")
            return
        self._sys(u, f"Stopping {desc}...", prefix=False)
        self._set_state(u, "deactivating", "stop-sigterm")
        proc = u.proc
        timeout = lu.timeout_stop_s if lu.timeout_stop_s is not None else self.sc.stop_timeout_s
        timeout = min(timeout, self.sc.stop_timeout_s)
        timed_out = False
        for pg in list(u.pgids):
            with contextlib.suppress(OSError):
                os.killpg(pg, signal.SIGTERM)
        if proc is not None:
            try:
                await asyncio.wait_for(proc.wait(), timeout)
            except TimeoutError:
                timed_out = True
                self._sys(u, "State 'stop-sigterm' timed out. Killing.")
                self._sys(u, f"Killing process {proc.pid} ({Path(lu.exec_start.path).name if lu.exec_start else '?'})"
                             " with signal SIGKILL.")  # fmt: skip
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        if u.task and not u.task.done():
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(u.task, 2.0)
        await self._kill_cgroup(u, signal.SIGTERM, wait=0.5)
        u.main_pid = 0
        u.child_pids = []
        u.phase = ""
        u.invocation = ""
        self._reap_holders()
        self._render_gpus()
        if timed_out:
            self._sys(u, "Main process exited, code=killed, status=9/KILL")
            self._sys(u, "Failed with result 'timeout'.")
            u.result = "timeout"
        else:
            u.result = "success"
            self._sys(u, "Deactivated successfully.")
        self._sys(u, f"Stopped {desc}.", prefix=False)
        self._set_state(u, "failed" if timed_out and not restarting else "inactive",
                        "failed" if timed_out and not restarting else "dead")  # fmt: skip


def _open_append(path: Path) -> TextIO:
    return open(path, "a", encoding="utf-8")


def _existing_dir(path: str) -> str:
    return path if path and os.path.isdir(path) else "/"


def _pg_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except OSError:
        return False
    return True


def _cmdline(pid: int) -> str:
    try:
        data = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return " ".join(p for p in data.decode("utf-8", "replace").split("\0") if p)


def _usec(seconds: float) -> str:
    if seconds == float("inf"):
        return "infinity"
    ms = round(seconds * 1000)
    if ms % 60000 == 0 and ms:
        return f"{ms // 60000}min"
    if ms % 1000 == 0:
        return f"{ms // 1000}s"
    return f"{ms}ms"


def _exec_prop(cmd: ExecLine, st: ExecStatus) -> str:
    start = f"[{fmt_ts(st.start_us)}]" if st.start_us else "[n/a]"
    stop = f"[{fmt_ts(st.stop_us)}]" if st.stop_us else "[n/a]"
    return (f"{{ path={cmd.path} ; argv[]={' '.join(cmd.display_argv)} ; ignore_errors="
            f"{'yes' if cmd.ignore_errors else 'no'} ; start_time={start} ; stop_time={stop} ; pid={st.pid} ; "
            f"code={st.code} ; status={st.status_text()} }}")  # fmt: skip


def _columns(rows: Sequence[tuple[str, ...]]) -> str:
    if not rows:
        return ""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    out = []
    for r in rows:
        out.append(" ".join(c.ljust(widths[i]) for i, c in enumerate(r[:-1])) + " " + r[-1])
    return "\n".join(out) + "\n"
