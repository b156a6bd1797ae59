"""A throwaway Debian 12 container with systemd as PID 1 and OpenSSH, for the real-systemd test tier.

The root file system is built once with debootstrap and cached under ``INFERBOT_ROOTFS_CACHE``
(default ``/var/cache/inferbot-tests``), keyed by a hash of the package list and the setup script, built in
a temporary directory and renamed into place when complete. Each test session boots an overlay of it
(the cache is never written), with ``systemd-nspawn --boot`` sharing the host's network namespace: sshd
and the stand-in servers listen on 127.0.0.1 only, on free ports. The Debian mirror is read from this
machine's apt sources at run time.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from tests.sshd import free_port

CACHE = Path(os.environ.get("INFERBOT_ROOTFS_CACHE", "/var/cache/inferbot-tests"))
SUITE = "bookworm"
PACKAGES = ("systemd", "systemd-sysv", "dbus", "openssh-server", "python3", "sudo", "curl", "procps",
            "util-linux", "numactl", "iproute2")
LOGIN_USER = "inferbot"
# Runs in the fresh rootfs (chroot) once per cache key: the bot's login user (journal reader, narrow sudo for
# the probe's fallbacks), the service user for `sudo -u`, and a "venv" python for launcher scripts.
SETUP = f"""set -e
useradd -m -s /bin/sh -G systemd-journal {LOGIN_USER}
usermod -p '*' {LOGIN_USER}
useradd -r -M -s /usr/sbin/nologin vllm
mkdir -p /opt/venv/bin /models /etc/inferbot /home/{LOGIN_USER}/.ssh
ln -sf /usr/bin/python3 /opt/venv/bin/python
echo '{LOGIN_USER} ALL=(root) NOPASSWD: /usr/bin/base64, /usr/bin/journalctl, /usr/bin/tail, /usr/bin/systemctl' \\
  > /etc/sudoers.d/{LOGIN_USER}
chmod 0440 /etc/sudoers.d/{LOGIN_USER}
rm -f /etc/ssh/ssh_host_*
: > /etc/machine-id
systemctl mask systemd-timesyncd.service getty@tty1.service console-getty.service 2>/dev/null || true
apt-get clean
"""


def cache_key() -> str:
    """Hash of what goes into the rootfs: change the packages or the setup and the cache is rebuilt."""
    return hashlib.sha256(f"{SUITE}\n{' '.join(PACKAGES)}\n{SETUP}".encode()).hexdigest()[:16]


def missing_requirements() -> str | None:
    """Why this tier cannot run here (one line), or None."""
    if os.geteuid() != 0:
        return "needs root, systemd-nspawn and debootstrap (runs in .ci/run as root)"
    missing = [p for p, exe in (("systemd-container", "systemd-nspawn"), ("debootstrap", "debootstrap"))
               if shutil.which(exe) is None]
    if missing:
        return f"needs {' '.join(missing)} (bash tests/run.sh installs them as root)"
    return None


def apt_mirror(suite: str = SUITE) -> str:
    """The Debian mirror this machine's apt uses for ``suite`` main (never written into the repo)."""
    sources: list[tuple[str, list[str]]] = []
    legacy = Path("/etc/apt/sources.list")
    if legacy.exists():
        for line in legacy.read_text().splitlines():
            m = re.match(r"\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", line)
            if m:
                sources.append((m.group(1), [m.group(2)]))
    for f in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")):
        for para in re.split(r"\n\s*\n", f.read_text()):
            fields = dict(re.findall(r"^(\w[\w-]*):\s*(.*)$", para, re.M))
            if "deb" in fields.get("Types", "").split() and fields.get("Enabled", "yes") != "no":
                for uri in fields.get("URIs", "").split():
                    sources.append((uri, fields.get("Suites", "").split()))
    for uri, suites in sources:
        if suite in suites and "security" not in uri:
            return uri
    raise RuntimeError(f"no apt source for Debian {suite} in /etc/apt/sources.list(.d)")


def rootfs() -> tuple[Path, float]:
    """The cached rootfs (built now if missing) and the seconds spent building it (0 when cached)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    dest = CACHE / f"{SUITE}-rootfs-{cache_key()}"
    if (dest / ".inferbot-ready").exists():
        return dest, 0.0
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be building the same key
        if (dest / ".inferbot-ready").exists():
            return dest, 0.0
        for stale in CACHE.glob(f".build-{SUITE}-*"):
            shutil.rmtree(stale, ignore_errors=True)  # left by a killed run: we hold the lock, nobody builds it
        t0 = time.monotonic()
        tmp = Path(tempfile.mkdtemp(prefix=f".build-{SUITE}-", dir=CACHE))
        os.chmod(tmp, 0o755)  # it becomes the container's "/": mkdtemp's 0700 would lock out every non-root user
        try:
            subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE,
                            str(tmp), apt_mirror()], check=True, capture_output=True, timeout=1200)
            subprocess.run(["chroot", str(tmp), "/bin/sh", "-c", SETUP], check=True, capture_output=True,
                           timeout=120)
            (tmp / ".inferbot-ready").write_text(cache_key() + "\n")
            os.rename(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return dest, time.monotonic() - t0


@dataclass
class Container:
    """A booted container: its root as seen from the host, its sshd, and a way to run commands inside."""

    root: Path
    ssh_port: int
    host_public: str
    proc: subprocess.Popen[bytes]
    leader: int
    log: Path
    boot_seconds: float = 0.0
    build_seconds: float = 0.0
    mounts: list[Path] = field(default_factory=list)

    def path(self, p: str) -> Path:
        """Host path of ``p`` inside the container."""
        return self.root / p.lstrip("/")

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` inside the container (all its namespaces) as root."""
        r = subprocess.run(["nsenter", "-t", str(self.leader), "-a", "--", *argv], capture_output=True,
                           text=True, check=False, timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} (in the container): exit {r.returncode}\n{r.stdout}{r.stderr}")
        return r

    def known_hosts_line(self) -> str:
        """The ``[127.0.0.1]:port key`` line for the container's sshd."""
        return f"[127.0.0.1]:{self.ssh_port} {self.host_public}"

    def wait_active(self, units: list[str], timeout: float = 60) -> None:
        """Wait until every unit is active (and its stand-in answers), else fail with their status."""
        deadline = time.monotonic() + timeout
        while True:
            r = self.run("systemctl", "is-active", *units, check=False)
            if r.returncode == 0:
                return
            if time.monotonic() > deadline:
                st = self.run("systemctl", "status", "--no-pager", "-l", *units, check=False)
                raise RuntimeError(f"units not active:\n{r.stdout}\n{st.stdout[-4000:]}")
            time.sleep(0.3)

    def wait_state(self, unit: str, state: str, timeout: float = 60) -> None:
        """Wait until ``systemctl is-active unit`` says ``state`` (e.g. ``failed``)."""
        deadline = time.monotonic() + timeout
        while (now := self.run("systemctl", "is-active", unit, check=False).stdout.strip()) != state:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{unit} is {now}, not {state}")
            time.sleep(0.3)

    def wait_listening(self, ports: list[int], timeout: float = 30) -> None:
        """Wait until something listens on every loopback port."""
        deadline = time.monotonic() + timeout
        for port in ports:
            while True:
                with socket.socket() as s:
                    if s.connect_ex(("127.0.0.1", port)) == 0:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"nothing listens on 127.0.0.1:{port}")
                time.sleep(0.1)


def _overlay(lower: Path, work: Path) -> tuple[Path, list[Path]]:
    """A writable view of ``lower`` (overlayfs; a reflink/copy when overlayfs is not available)."""
    merged, upper, wd = work / "root", work / "upper", work / "work"
    for d in (merged, upper, wd):
        d.mkdir()
    r = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir={lower},upperdir={upper},workdir={wd}", str(merged)], capture_output=True)
    if r.returncode == 0:
        return merged, [merged]
    merged.rmdir()
    subprocess.run(["cp", "-a", "--reflink=auto", str(lower), str(merged)], check=True)
    return merged, []


def _container_init(nspawn_pid: int) -> int:
    """The container's PID 1 (0 while there is none yet): the child of ``systemd-nspawn`` in a PID namespace of
    its own. nspawn's first child is an intermediate one that forks it and exits (under load it is still there
    when we look): entering that one's namespaces fails once it is gone."""
    kids = subprocess.run(["pgrep", "-P", str(nspawn_pid)], capture_output=True, text=True).stdout.split()
    ours = os.readlink("/proc/self/ns/pid")
    for kid in kids:
        try:
            if os.readlink(f"/proc/{kid}/ns/pid") != ours:
                return int(kid)
        except OSError:  # it has just exited
            continue
    return 0


@contextlib.contextmanager
def booted(client_public_key: str, prepare: Callable[[Path], None] | None = None) -> Iterator[Container]:
    """Boot a fresh container; ``prepare(root)`` writes units and files into its root before boot."""
    base, build_s = rootfs()
    work = Path(tempfile.mkdtemp(prefix="inferbot-nspawn-", dir="/var/tmp"))
    root, mounts = _overlay(base, work)
    port = free_port()
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    key_path = root / "etc/ssh/ssh_host_ed25519_key"
    host_key.write_private_key(str(key_path))
    os.chmod(key_path, 0o600)
    host_key.write_public_key(str(key_path) + ".pub")
    (root / "etc/ssh/sshd_config.d/inferbot.conf").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey /etc/ssh/ssh_host_ed25519_key\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nMaxStartups 200:30:400\nMaxSessions 20\n")
    ssh_dir = root / f"home/{LOGIN_USER}/.ssh"
    (ssh_dir / "authorized_keys").write_text(client_public_key.strip() + "\n")
    subprocess.run(["chroot", str(root), "chown", "-R", f"{LOGIN_USER}:{LOGIN_USER}", f"/home/{LOGIN_USER}"],
                   check=True)
    os.chmod(ssh_dir, 0o700)
    if prepare is not None:
        prepare(root)
    log = work / "nspawn.log"
    name = f"inferbot-{os.getpid()}"
    t0 = time.monotonic()
    proc = subprocess.Popen(
        ["systemd-nspawn", "-D", str(root), "-M", name, "--boot", "--register=no", "--keep-unit",
         "--resolv-conf=off", "--timezone=off", "--link-journal=no", "--console=pipe"],
        stdin=subprocess.DEVNULL, stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
    container: Container | None = None
    try:
        leader = 0
        deadline = time.monotonic() + 60
        while not leader:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"systemd-nspawn did not boot: {log.read_text(errors='replace')[-3000:]}")
            leader = _container_init(proc.pid)
            time.sleep(0.05)
        container = Container(root=root, ssh_port=port, host_public=host_key.export_public_key().decode().strip(),
                              proc=proc, leader=leader, log=log, build_seconds=build_s, mounts=mounts)
        while True:
            r = container.run("systemctl", "is-system-running", "--wait", check=False, timeout=90)
            if r.stdout.strip() in ("running", "degraded"):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"container did not finish booting: {r.stdout} {r.stderr}")
            time.sleep(0.2)
        container.boot_seconds = time.monotonic() - t0
        yield container
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)  # nspawn halts the container cleanly on the first SIGTERM
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        for m in mounts:
            subprocess.run(["umount", "-l", str(m)], capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
