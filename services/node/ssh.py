"""Pooled SSH access to the nodes (asyncssh): one connection per node, many channels on it.

Host keys are always verified against the configured known_hosts; nothing here can turn that off.
Every failure becomes a ``NodeError`` with a reason a person understands and a fix.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from dataclasses import dataclass, field

import asyncssh

from config.models import Node
from services.models import CommandResult, NodeError

log = logging.getLogger("inferbot.ssh")

# OpenSSH allows 10 sessions per connection (MaxSessions); sshd frees a slot a moment after the
# client sees a channel close, so 8 keeps clear of spurious "open failed" under load.
MAX_CHANNELS = 8
# How many commands may be starting at once across the pool (a channel opened, the exec request not yet
# answered). asyncssh keeps an exec request's bytes (the probe is ~17 KB) until sshd answers it, and with
# hundreds of nodes those answers queue in the event loop behind the nodes' output: a question to 512
# nodes held all 512 requests and most of the outputs at once (~10 MB of its peak RSS; 128 saved ~8 MB).
# A command only waits here for its start (one round trip); it runs, and its output arrives, beyond
# the gate. The price is on a slow link: a start waits for one of 64 answers, so 512 nodes at 100 ms of
# round trip start in ~0.8 s instead of at once (on a LAN, or loopback, nothing measurable).
EXEC_GATE = 64
PREFERRED_CIPHERS = (
    "aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com", "aes256-ctr", "aes128-ctr",
)


class NodeUnreachable(Exception):
    """A node could not be asked; ``error`` says why and how to fix it."""

    def __init__(self, error: NodeError) -> None:
        super().__init__(error.reason)
        self.error = error


@dataclass
class _Slot:
    conn: asyncssh.SSHClientConnection | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    channels: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(MAX_CHANNELS))


class NodePool:
    """Keeps one SSH connection per node and runs commands on it, reconnecting when it drops."""

    def __init__(self, keepalive_s: float = 30.0) -> None:
        self._slots: dict[str, _Slot] = {}
        self._keepalive = keepalive_s
        self.connects = 0  # how many SSH handshakes were made (the benchmark reports it)
        self.runs = 0
        self._starting = asyncio.Semaphore(EXEC_GATE)

    def _slot(self, node: Node) -> _Slot:
        # Any change to how the node is reached or verified must not reuse the old connection.
        key = f"{node.user}@{node.host}:{node.port}|{node.known_hosts}|{node.key_file}"
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = _Slot()
        return slot

    async def _connect(self, node: Node, limit_s: float) -> asyncssh.SSHClientConnection:
        known_hosts, keys = _local_files(node)
        # The handshake gets the node's configured `timeout` (what the answer quotes), never more.
        limit_s = min(limit_s, node.timeout)
        try:
            conn = await asyncio.wait_for(
                asyncssh.connect(
                    node.host, port=node.port, username=node.user, client_keys=keys,
                    known_hosts=known_hosts, agent_path=None, password=None,
                    preferred_auth="publickey", connect_timeout=limit_s,
                    keepalive_interval=self._keepalive, keepalive_count_max=3,
                    config=[],  # the bot's behaviour must not depend on ~/.ssh/config
                    # AES-GCM runs on the CPU's AES instructions; asyncssh's ChaCha20 builds a cipher per
                    # packet, which made it most of the bot's CPU per question. Both are modern AEADs.
                    encryption_algs=PREFERRED_CIPHERS,
                ),
                limit_s,
            )
        except BaseException as e:
            if isinstance(e, asyncio.CancelledError):
                raise
            error = describe_error(node, e, node.timeout)
            # (HostKeyNotVerifiable and PermissionDenied are DisconnectErrors too: test them first.)
            if isinstance(e, asyncssh.HostKeyNotVerifiable | asyncssh.PermissionDenied):
                if isinstance(e, asyncssh.HostKeyNotVerifiable) and not _host_on_record(node, known_hosts):
                    error = NodeError(
                        kind="host_key",
                        reason=f"the host {node.host}:{node.port} is not in known_hosts ({node.known_hosts})",
                        fix=f"verify its fingerprint out of band, then add it: "
                            f"ssh-keyscan -p {node.port} {node.host} >> {node.known_hosts}",
                    )
            elif isinstance(e, asyncssh.DisconnectError):
                error = await _not_ssh(node) or error
            raise NodeUnreachable(error) from None
        self.connects += 1
        return conn

    async def _connection(self, node: Node, limit_s: float) -> asyncssh.SSHClientConnection:
        slot = self._slot(node)
        async with slot.lock:
            if slot.conn is None or slot.conn.is_closed():
                slot.conn = await self._connect(node, limit_s)
            return slot.conn

    async def run(
        self, node: Node, command: str, limit_s: float | None = None, stdin: str | None = None
    ) -> CommandResult:
        """Run one fixed command on ``node``; raise ``NodeUnreachable`` with the reason on failure."""
        limit = limit_s if limit_s is not None else node.timeout
        deadline = time.monotonic() + limit
        started = time.monotonic()
        slot = self._slot(node)
        for attempt in (1, 2):
            remaining = max(0.5, deadline - time.monotonic())
            conn = await self._connection(node, remaining)
            try:
                async with slot.channels:
                    remaining = max(0.5, deadline - time.monotonic())
                    proc = await asyncio.wait_for(self._exec(conn, command, stdin, remaining), remaining + 1)
            except (asyncssh.ChannelOpenError, asyncssh.ConnectionLost, asyncssh.DisconnectError,
                    ConnectionResetError, BrokenPipeError) as e:
                # A pooled connection may have died since it was last used: reconnect once.
                slot.conn = None
                if attempt == 2:
                    raise NodeUnreachable(describe_error(node, e, limit)) from None
                continue
            except (TimeoutError, asyncssh.TimeoutError) as e:
                raise NodeUnreachable(describe_error(node, e, limit)) from None
            self.runs += 1
            return CommandResult(
                exit_status=proc.exit_status,
                stdout=_text(proc.stdout),
                stderr=_text(proc.stderr),
                elapsed_s=time.monotonic() - started,
            )
        raise AssertionError("unreachable")  # pragma: no cover

    async def _exec(self, conn: asyncssh.SSHClientConnection, command: str, stdin: str | None,
                    limit_s: float) -> asyncssh.SSHCompletedProcess:
        """``conn.run(command, check=False, input=stdin, timeout=limit_s)``, its start behind ``EXEC_GATE``."""
        async with self._starting:
            process = await conn.create_process(command, input=stdin)
        return await process.wait(check=False, timeout=limit_s)

    async def close(self) -> None:
        """Close every pooled connection."""
        conns = [s.conn for s in self._slots.values() if s.conn is not None]
        self._slots.clear()
        for c in conns:
            c.close()
        for c in conns:
            try:
                await asyncio.wait_for(c.wait_closed(), 2)
            except (TimeoutError, OSError, asyncssh.Error):
                pass


def _local_files(node: Node) -> tuple[str, list[str] | None]:
    """The known_hosts path and client keys for ``node``; missing files are config errors."""
    known_hosts = os.path.expanduser(node.known_hosts)
    if not os.path.exists(known_hosts):
        raise NodeUnreachable(NodeError(
            kind="host_key",
            reason=f"known_hosts file {node.known_hosts} does not exist",
            fix=f"verify the node's host key fingerprint, then add it: "
                f"ssh-keyscan -p {node.port} {node.host} >> {node.known_hosts}",
        ))
    if not node.key_file:
        return known_hosts, None
    key_path = os.path.expanduser(node.key_file)
    if not os.path.exists(key_path):
        raise NodeUnreachable(NodeError(
            kind="auth", reason=f"key file {node.key_file} does not exist",
            fix="create it with ssh-keygen -t ed25519 -f KEYFILE, or fix key_file in the config",
        ))
    return known_hosts, [key_path]


def _host_on_record(node: Node, known_hosts: str) -> bool:
    """True when known_hosts has any key for the node (so a refused key is a mismatch, not a missing entry)."""
    try:
        entries = asyncssh.read_known_hosts(known_hosts)
        keys, cas, _revoked, certs, ca_certs, _, _ = entries.match(node.host, node.host, node.port)
    except (OSError, ValueError, asyncssh.Error):
        return True  # unreadable: keep the cautious "mismatch" wording
    return bool(keys or cas or certs or ca_certs)


GREETING_WAIT_S = 1.5


async def _not_ssh(node: Node) -> NodeError | None:
    """When the handshake broke off: is the port an SSH server at all? A NodeError saying so, or None.

    An SSH server sends its ``SSH-2.0-…`` greeting first; an HTTP server waits, and answers a greeting
    with an error page. A port that closes without a word is left to the usual wording (sshd's
    MaxStartups drops connections like that).
    """
    where = f"{node.host}:{node.port}"
    wait = min(GREETING_WAIT_S, node.timeout)
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(node.host, node.port), wait)
    except (OSError, TimeoutError):
        return None
    try:
        said = await _read_some(reader, wait)
        if said == b"" and reader.at_eof():
            return None
        if not said:
            writer.write(b"SSH-2.0-inferbot_check\r\n")
            said = await _read_some(reader, wait)
    except OSError:
        return None
    finally:
        writer.close()
    first = said.split(b"\n", 1)[0].strip().decode("ascii", "replace")
    if first.startswith("SSH-"):
        return None
    answered = f"it answered {first[:60]!r}" if first else "it sent no SSH greeting"
    return NodeError(kind="protocol", reason=f"{where} is not an SSH server ({answered})",
                     fix=f"check `host` and `port` of node {node.name} in the config: they must name the node's sshd")


async def _read_some(reader: asyncio.StreamReader, wait: float) -> bytes:
    try:
        return await asyncio.wait_for(reader.read(256), wait)
    except TimeoutError:
        return b""


def _text(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def describe_error(node: Node, e: BaseException, timeout: float) -> NodeError:
    """Turn a connection/command failure into a reason and a fix (never a traceback)."""
    where = f"{node.host}:{node.port}"
    if isinstance(e, asyncssh.HostKeyNotVerifiable):
        return NodeError(
            kind="host_key",
            reason=f"host key mismatch for {where}: the key it presented is not the one in {node.known_hosts}",
            fix="the key the node presented is not the one on record — if the node was reinstalled, "
                "verify its new fingerprint out of band and update known_hosts; never accept it blindly",
        )
    if isinstance(e, asyncssh.PermissionDenied):
        return NodeError(
            kind="auth", reason=f"authentication refused for user {node.user!r} on {where}",
            fix=f"add the bot's public key to ~{node.user}/.ssh/authorized_keys on the node, "
                f"and check key_file in the config",
        )
    if isinstance(e, ConnectionRefusedError):
        return NodeError(kind="refused", reason=f"connection refused on {where}",
                         fix="is sshd running on the node, and is the port right?")
    if isinstance(e, TimeoutError | asyncssh.TimeoutError | asyncio.TimeoutError):
        return NodeError(
            kind="timeout", reason=f"no answer from {where} within {timeout:g}s",
            fix=f"check that the node is up and reachable; raise `timeout` of node {node.name} if it is slow",
        )
    if isinstance(e, socket.gaierror):
        return NodeError(kind="dns", reason=f"cannot resolve host {node.host!r}",
                         fix="check `host` for this node in the config")
    if isinstance(e, asyncssh.ChannelOpenError | asyncssh.ConnectionLost | asyncssh.DisconnectError):
        return NodeError(kind="protocol", reason=f"SSH connection to {where} was closed ({e})",
                         fix="check sshd's logs on the node (MaxSessions, MaxStartups)")
    if isinstance(e, asyncssh.KeyImportError | asyncssh.KeyEncryptionError):
        return NodeError(kind="auth", reason=f"cannot use key file {node.key_file}: {e}",
                         fix="use an unencrypted ed25519 key readable by the bot")
    if isinstance(e, OSError):
        return NodeError(kind="other", reason=f"cannot reach {where}: {e.strerror or e}",
                         fix="check the network path to the node")
    return NodeError(kind="other", reason=f"SSH to {where} failed: {type(e).__name__}: {e}", fix="")
