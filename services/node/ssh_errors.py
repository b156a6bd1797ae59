"""Why a node could not be asked, in words a person can act on: a reason and a fix, never a traceback.

``describe_error`` words any failure of a connection or a command; ``connect_error`` adds what only a
failed handshake can tell (a host missing from known_hosts, a port that is not an SSH server at all).
"""

from __future__ import annotations

import asyncio
import socket

import asyncssh

from config.models import Node
from services.models import NodeError


class NodeUnreachable(Exception):
    """A node could not be asked; ``error`` says why and how to fix it."""

    def __init__(self, error: NodeError) -> None:
        super().__init__(error.reason)
        self.error = error


async def connect_error(node: Node, e: BaseException, known_hosts: str) -> NodeError:
    """The reason and fix for a handshake with ``node`` that failed with ``e`` (``known_hosts``: the file)."""
    error = describe_error(node, e, node.timeout)
    # (HostKeyNotVerifiable and PermissionDenied are DisconnectErrors too: test them first.)
    if isinstance(e, asyncssh.HostKeyNotVerifiable | asyncssh.PermissionDenied):
        if isinstance(e, asyncssh.HostKeyNotVerifiable) and not _host_on_record(node, known_hosts):
            return NodeError(
                kind="host_key",
                reason=f"the host {node.host}:{node.port} is not in known_hosts ({node.known_hosts})",
                fix=f"verify its fingerprint out of band, then add it: "
                    f"ssh-keyscan -p {node.port} {node.host} >> {node.known_hosts}",
            )
    elif isinstance(e, asyncssh.DisconnectError):
        return await _not_ssh(node) or error
    return error


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
