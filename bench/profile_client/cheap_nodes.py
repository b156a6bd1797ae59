"""Cheap nodes for the ``ssh`` and ``watch --ssh`` modes: OpenSSH sshds on loopback that answer every session
with a recorded probe output."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

LISTEN_PER_SSHD = 16  # sshd listens on at most 16 sockets (MAX_LISTEN_SOCKS)


@dataclass
class CheapNodes:
    """sshds that answer every command with a recorded probe output (``ForceCommand … cat FILE``); a command
    whose length has a ``FILE.loop-LENGTH`` file (the watcher's persistent session) gets ``FILE.session`` once
    per line it reads."""

    hosts: list[tuple[str, int]]
    user: str
    known_hosts: Path
    key_file: Path
    stop: Callable[[], None]


def start_cheap_nodes(n: int, answer_file: Path, work: Path) -> CheapNodes:
    """``n`` (host, port) pairs on 127.0.x.y, served by ceil(n/16) sshds with a host key each.

    sshd listens on at most 16 sockets, so each sshd takes 16 addresses (one port); every session runs
    ``cat answer_file`` whatever command it was given. Host keys are checked: one known_hosts line per address.
    """
    from tests.sshd import ClientKey, Sshd, free_port, login_user

    user = login_user()
    key = ClientKey(work)
    os.chmod(answer_file, 0o644)
    sshds: list[Sshd] = []
    hosts: list[tuple[str, int]] = []
    lines: list[str] = []
    try:
        for first in range(0, n, LISTEN_PER_SSHD):
            addrs = [f"127.0.{1 + i // 250}.{2 + i % 250}" for i in range(first, min(n, first + LISTEN_PER_SSHD))]
            sshd = _start_sshd(key.public, addrs, free_port(addrs[0]), user, answer_file)
            sshds.append(sshd)
            for a in addrs:
                hosts.append((a, sshd.port))
                lines.append(f"[{a}]:{sshd.port} {sshd.host_public}")
    except BaseException:
        for s in sshds:
            s.stop()
        raise
    kh = work / "known_hosts"
    kh.write_text("\n".join(lines) + "\n")

    def stop() -> None:
        for s in sshds:
            s.stop()

    return CheapNodes(hosts=hosts, user=user, known_hosts=kh, key_file=key.private, stop=stop)


def _start_sshd(client_public: Path, addrs: list[str], port: int, user: str, answer_file: Path) -> Any:
    """One OpenSSH sshd on ``addrs``:``port`` (key-only login, as tests/sshd.py) that answers with ``cat``."""
    import asyncssh

    from tests.sshd import SSHD, Sshd

    d = Path(tempfile.mkdtemp(prefix="inferbot-cheap-"))
    os.chmod(d, 0o755)
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    host_key.write_private_key(str(d / "host_key"))
    os.chmod(d / "host_key", 0o600)
    shutil.copy(client_public, d / "authorized_keys")
    os.chmod(d / "authorized_keys", 0o644)
    cfg = "".join(f"ListenAddress {a}:{port}\n" for a in addrs) + (
        f"HostKey {d}/host_key\nPidFile {d}/sshd.pid\n"
        f"AuthorizedKeysFile {d}/authorized_keys\nPubkeyAuthentication yes\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nPermitRootLogin prohibit-password\nStrictModes no\n"
        "LogLevel ERROR\nMaxStartups 200:30:400\nMaxSessions 20\n"
        f'ForceCommand if [ -e {answer_file}.loop-${{#SSH_ORIGINAL_COMMAND}} ]; then while read -r t; do '
        f'cat {answer_file}.session; done; else exec cat {answer_file}; fi\n'
    )
    (d / "sshd_config").write_text(cfg)
    with open(d / "sshd.log", "ab") as log:
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stdout=log, stderr=log)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError((d / "sshd.log").read_text(errors="replace")[-2000:])
        with socket.socket() as sock:
            if sock.connect_ex((addrs[0], port)) == 0:
                return Sshd(host=addrs[0], port=port, dir=d, proc=proc,
                            host_public=host_key.export_public_key().decode().strip(), user=user)
        time.sleep(0.01)
    proc.kill()
    raise RuntimeError("sshd did not start")
