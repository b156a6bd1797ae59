"""The bot's SSH files (known_hosts, client key): checked for each node, read once and shared by every
connection until they change.

Given file names, asyncssh reads and parses them again for every connection: the client key (and its
``.pub`` and ``-cert.pub``) in a worker thread, and the whole known_hosts file, every key in it decoded, in
the event loop: with N nodes and a known_hosts of N lines, N² key imports to open the pool. Parsed once,
the same objects are handed to every connection: asyncssh matches a host against a parsed known_hosts
exactly as against its file, so what is trusted does not change.

A file that changes (a host key added after "not in known_hosts", a rotated client key) is read again on
the next connection: each use compares the file's inode, size, mtime and ctime with the ones it was read at.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

import asyncssh

from config.local_file import KNOWN_HOSTS_MAX_BYTES, SSH_KEY_MAX_BYTES, regular_file_problem
from config.models import Node
from services.models import NodeError
from services.node.ssh_errors import NodeUnreachable

T = TypeVar("T")
Stamp = tuple[tuple[int, int, int, int] | None, ...]


def _stamp(paths: Sequence[str]) -> Stamp:
    out: list[tuple[int, int, int, int] | None] = []
    for p in paths:
        try:
            st = os.stat(p)
        except OSError:
            out.append(None)
        else:
            out.append((st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(out)


class _Shared(Generic[T]):
    """One parsed file per path, re-read when its stamp changes; one read at a time per path."""

    def __init__(self, read: Callable[[str], T], companions: Callable[[str], Sequence[str]]) -> None:
        self._read = read
        self._companions = companions
        self._parsed: dict[str, tuple[Stamp, T]] = {}
        self._reading: dict[str, asyncio.Future[tuple[Stamp, T]]] = {}

    async def get(self, path: str) -> T:
        stamp = _stamp(self._companions(path))
        while True:
            held = self._parsed.get(path)
            if held is not None and held[0] == stamp:
                return held[1]
            pending = self._reading.get(path)
            if pending is None:
                break
            # Another connection is reading it: share its result (or its error) instead of reading twice.
            await asyncio.shield(pending)
        future: asyncio.Future[tuple[Stamp, T]] = asyncio.get_running_loop().create_future()
        self._reading[path] = future
        try:
            # A large known_hosts takes tens of milliseconds to parse: not in the event loop.
            value = await asyncio.to_thread(self._read, path)
        except BaseException as e:
            future.set_exception(e)
            future.exception()  # retrieved here: a waiter may not exist, and that is no error to log
            raise
        finally:
            del self._reading[path]
        self._parsed[path] = (stamp, value)
        future.set_result((stamp, value))
        return value


def _keypairs(path: str) -> list[asyncssh.SSHKeyPair]:
    return list(asyncssh.load_keypairs(path))


class SshFiles:
    """The parsed known_hosts and client keys of a pool (see the module's docstring)."""

    def __init__(self) -> None:
        self._known_hosts: _Shared[asyncssh.SSHKnownHosts] = _Shared(asyncssh.read_known_hosts, lambda p: (p,))
        # asyncssh pairs a key with its ``.pub`` and ``-cert.pub`` when they exist: a change to any is a new key.
        self._keys: _Shared[list[asyncssh.SSHKeyPair]] = _Shared(
            _keypairs, lambda p: (p, p + ".pub", p + "-cert.pub"))

    async def known_hosts(self, path: str) -> asyncssh.SSHKnownHosts:
        """The parsed known_hosts file at ``path`` (errors as asyncssh raises them for the file)."""
        return await self._known_hosts.get(path)

    async def client_keys(self, path: str) -> list[asyncssh.SSHKeyPair]:
        """The key pairs asyncssh loads for the private key file at ``path``."""
        return await self._keys.get(path)


def local_files(node: Node) -> tuple[str, str | None]:
    """The known_hosts path and client key path for ``node``; missing files are config errors."""
    known_hosts = os.path.expanduser(node.known_hosts)
    if not os.path.exists(known_hosts):
        raise NodeUnreachable(NodeError(
            kind="host_key",
            reason=f"known_hosts file {node.known_hosts} does not exist",
            fix=f"verify the node's host key fingerprint, then add it: "
                f"ssh-keyscan -p {node.port} {node.host} >> {node.known_hosts}",
        ))
    # asyncssh reads these files itself: a FIFO would block its reader for good, /dev/zero fill the memory.
    problem = regular_file_problem(known_hosts, KNOWN_HOSTS_MAX_BYTES)
    if problem:
        raise NodeUnreachable(NodeError(kind="host_key", reason=f"known_hosts file {node.known_hosts} {problem}",
                                        fix="set known_hosts to the file holding the nodes' host keys"))
    if not node.key_file:
        return known_hosts, None
    key_path = os.path.expanduser(node.key_file)
    if not os.path.exists(key_path):
        raise NodeUnreachable(NodeError(
            kind="auth", reason=f"key file {node.key_file} does not exist",
            fix="create it with ssh-keygen -t ed25519 -f KEYFILE, or fix key_file in the config",
        ))
    for path in (key_path, key_path + ".pub", key_path + "-cert.pub"):  # asyncssh reads the pair's too
        problem = regular_file_problem(path, SSH_KEY_MAX_BYTES)
        if problem:
            raise NodeUnreachable(NodeError(kind="auth", reason=f"key file {path} {problem}",
                                            fix="set key_file to the bot's private key file"))
    return known_hosts, key_path
