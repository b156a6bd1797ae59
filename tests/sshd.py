"""A real OpenSSH ``sshd`` on 127.0.0.x for tests: throwaway host key, key-only auth, real host-key checks.

Each simulated node gets its own sshd (it starts in ~40 ms), whose ``SetEnv`` puts the node's fake
``systemctl``/``journalctl``/``nvidia-smi``/``sudo`` first in PATH. When the tests run as root, SSH
logs in as an unprivileged user (root's shell start-up is slow here and sshd refuses signals for root).
"""

from __future__ import annotations

import contextlib
import os
import pwd
import random
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

SSHD = "/usr/sbin/sshd"
TEST_USER = os.environ.get("INFERBOT_TEST_SSH_USER", "inferbot-test")


def sshd_available() -> bool:
    """True when OpenSSH's server is installed."""
    return os.path.exists(SSHD)


def login_user() -> str:
    """The user SSH logs in as: the dedicated test user when we are root, else ourselves."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.getuid()).pw_name
    try:
        pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "-m", "-s", "/bin/sh", TEST_USER], check=True, capture_output=True)
    # With UsePAM off, sshd refuses locked accounts ("!" password); "*" means no password, not locked.
    subprocess.run(["usermod", "-p", "*", TEST_USER], check=True, capture_output=True)
    return TEST_USER


EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_handed_out: set[tuple[str, int]] = set()


def _outside_ephemeral() -> range:
    """Ports the kernel never gives an outgoing connection's local end: below its ephemeral range (from 10,000),
    or above it when there is no room below."""
    try:
        low, high = (int(x) for x in EPHEMERAL_RANGE.read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    return range(10_000, low) if low - 10_000 >= 1_000 else range(high + 1, 65_536)


def _worker_share(span: range) -> range:
    """This pytest-xdist worker's own ports of ``span`` (every n-th): two workers never pick the same port, even
    between one's check and its server's bind (the simulated vLLM binds with SO_REUSEPORT, as vLLM does)."""
    worker, count = os.environ.get("PYTEST_XDIST_WORKER", ""), os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if not worker.startswith("gw") or not count.isdigit() or int(count) < 2:
        return span
    return span[int(worker.removeprefix("gw")) % int(count)::int(count)]


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free a moment ago, outside the kernel's ephemeral range, and never the same twice here.

    The kernel's own choice (binding port 0) comes from the range it also gives outgoing connections: an SSH,
    HTTP or PostgreSQL client of another test could take the port before the server it was meant for binds
    it, and a simulated vLLM that cannot bind its port fails its unit, as a real one would (seen once in a
    full run). A port picked outside that range can only be taken by another listener.
    """
    span = _worker_share(_outside_ephemeral())
    for _ in range(500):
        port = random.choice(span)
        if (host, port) in _handed_out:
            continue
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _handed_out.add((host, port))
        return port
    with socket.socket() as s:  # a machine with every such port taken: the kernel's choice, as before
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class ClientKey:
    """The bot's key pair for tests."""

    dir: Path
    private: Path = field(init=False)
    public: Path = field(init=False)

    def __post_init__(self) -> None:
        self.private = self.dir / "id_ed25519"
        self.public = self.dir / "id_ed25519.pub"
        if not self.private.exists():
            key = asyncssh.generate_private_key("ssh-ed25519")
            key.write_private_key(str(self.private))
            key.write_public_key(str(self.public))
            os.chmod(self.private, 0o600)


@dataclass
class Sshd:
    """One running sshd."""

    host: str
    port: int
    dir: Path
    proc: subprocess.Popen[bytes]
    host_public: str
    user: str

    def known_hosts_line(self) -> str:
        """The ``[host]:port key`` line a client needs."""
        return f"[{self.host}]:{self.port} {self.host_public}"

    def log(self) -> str:
        """sshd's own log (for failing tests)."""
        p = self.dir / "sshd.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def stop(self) -> None:
        """Stop sshd and remove its files."""
        if self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(3)
            if self.proc.poll() is None:
                self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


def start_sshd(
    client_key: ClientKey,
    env: dict[str, str],
    host: str = "127.0.0.1",
    user: str | None = None,
    extra_config: str = "",
) -> Sshd:
    """Start sshd on ``host``:random port; sessions get ``env`` via SetEnv (PATH included)."""
    if not sshd_available():
        raise RuntimeError("openssh-server is not installed (the test command installs it)")
    user = user or login_user()
    if os.geteuid() == 0:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    d = Path(tempfile.mkdtemp(prefix="inferbot-sshd-"))
    os.chmod(d, 0o755)  # sshd reads authorized_keys as the login user
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    host_key.write_private_key(str(d / "host_key"))
    os.chmod(d / "host_key", 0o600)
    host_public = host_key.export_public_key().decode().strip()
    shutil.copy(client_key.public, d / "authorized_keys")
    os.chmod(d / "authorized_keys", 0o644)
    setenv = " ".join(f"{k}={v}" for k, v in env.items())
    for attempt in range(5):
        port = free_port(host)
        cfg = (
            f"ListenAddress {host}\nPort {port}\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n"
            f"AuthorizedKeysFile {d}/authorized_keys\nPubkeyAuthentication yes\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\nStrictModes no\n"
            "LogLevel VERBOSE\nMaxStartups 200:30:400\nMaxSessions 20\nSubsystem sftp internal-sftp\n"
            f"SetEnv {setenv}\n{extra_config}"
        )
        (d / "sshd_config").write_text(cfg)
        log = open(d / "sshd.log", "ab")
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stdout=log, stderr=log)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                break
            with socket.socket() as s:
                if s.connect_ex((host, port)) == 0:
                    return Sshd(host=host, port=port, dir=d, proc=proc, host_public=host_public, user=user)
            time.sleep(0.01)
        proc.kill()
        if attempt == 4:
            raise RuntimeError(f"sshd did not start: {(d / 'sshd.log').read_text(errors='replace')[-2000:]}")
    raise AssertionError("unreachable")
