"""services/node/ssh_errors.py: a failed handshake against real servers, worded for a person.

A real OpenSSH sshd (its host key on record, missing, or another key on record) and a real HTTP server on
loopback; the failures are asyncssh's own, raised by ``asyncssh.connect``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from config.models import Node
from services.node.ssh_errors import connect_error, describe_error
from tests.sshd import ClientKey, Sshd, start_sshd

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")


@pytest.fixture
def sshd(client_key: ClientKey, ssh_user: str) -> Iterator[Sshd]:
    server = start_sshd(client_key, {"LC_ALL": "C"})
    try:
        yield server
    finally:
        server.stop()


def _node(host: str, port: int, known_hosts: Path, client_key: ClientKey) -> Node:
    return Node(name="gpu-a", host=host, port=port, user="inferbot-test", key_file=str(client_key.private),
                known_hosts=str(known_hosts), timeout=5.0)


async def _failure(node: Node) -> BaseException:
    try:
        conn = await asyncssh.connect(node.host, port=node.port, username=node.user, known_hosts=node.known_hosts,
                                      client_keys=[node.key_file], agent_path=None, config=[], connect_timeout=5)
    except (OSError, asyncssh.Error) as e:
        return e
    conn.close()
    raise AssertionError("the handshake succeeded")


async def test_a_host_missing_from_known_hosts_says_add_it(sshd: Sshd, client_key: ClientKey,
                                                           tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    node = _node(sshd.host, sshd.port, known_hosts, client_key)
    error = await connect_error(node, await _failure(node), str(known_hosts))
    assert error.kind == "host_key" and "is not in known_hosts" in error.reason
    assert f"ssh-keyscan -p {sshd.port} {sshd.host} >> {known_hosts}" in error.fix


async def test_another_key_on_record_is_a_mismatch(sshd: Sshd, client_key: ClientKey, tmp_path: Path) -> None:
    known_hosts = tmp_path / "known_hosts"
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode().strip()
    known_hosts.write_text(f"[{sshd.host}]:{sshd.port} {other}\n")
    node = _node(sshd.host, sshd.port, known_hosts, client_key)
    error = await connect_error(node, await _failure(node), str(known_hosts))
    assert error.kind == "host_key" and error.reason.startswith("host key mismatch")
    assert "never accept it blindly" in error.fix


async def _http(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(256)
    writer.write(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
    await writer.drain()
    writer.close()


async def test_a_port_that_is_not_ssh_says_so(client_key: ClientKey, tmp_path: Path) -> None:
    server = await asyncio.start_server(_http, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        node = _node("127.0.0.1", port, tmp_path / "known_hosts", client_key)
        (tmp_path / "known_hosts").write_text("")
        error = await connect_error(node, await _failure(node), str(tmp_path / "known_hosts"))
    finally:
        server.close()
    assert error.kind == "protocol"
    assert error.reason.startswith(f"127.0.0.1:{port} is not an SSH server (it answered 'HTTP/1.1 400")


async def test_a_refused_port_and_a_timeout() -> None:
    node = Node(name="gpu-a", host="127.0.0.1", port=1, user="u", key_file="", known_hosts="/k", timeout=5.0)
    assert describe_error(node, ConnectionRefusedError(), 5).kind == "refused"
    timeout = describe_error(node, TimeoutError(), 2.5)
    assert timeout.kind == "timeout" and timeout.reason == "no answer from 127.0.0.1:1 within 2.5s"
