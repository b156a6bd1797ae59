"""The network guard refuses anything outside loopback and lets loopback through."""

from __future__ import annotations

import asyncio
import socket

import pytest

from tests import netguard


def test_connect_outside_loopback_is_refused() -> None:
    with netguard.guard(), socket.socket() as s:
        s.settimeout(0.5)
        with pytest.raises(netguard.NetworkBlocked, match=r"10\.255\.255\.1"):
            s.connect(("10.255.255.1", 80))
        with pytest.raises(netguard.NetworkBlocked):
            s.connect_ex(("10.255.255.1", 80))


def test_name_lookup_outside_loopback_is_refused() -> None:
    with netguard.guard(), pytest.raises(netguard.NetworkBlocked, match=r"slack\.com"):
        socket.getaddrinfo("slack.com", 443)


def test_udp_outside_loopback_is_refused() -> None:
    with netguard.guard(), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s, \
            pytest.raises(netguard.NetworkBlocked):
        s.sendto(b"x", ("8.8.8.8", 53))


async def test_asyncio_connection_outside_loopback_is_refused() -> None:
    with netguard.guard():
        with pytest.raises(OSError, match="only loopback"):
            await asyncio.wait_for(asyncio.open_connection("10.255.255.1", 80), 1)
        with pytest.raises(OSError, match="only loopback"):
            await asyncio.wait_for(asyncio.open_connection("slack.com", 443), 1)


async def test_loopback_is_allowed() -> None:
    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hi")
        await writer.drain()
        writer.close()

    with netguard.guard():
        server = await asyncio.start_server(on_client, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        for host in ("127.0.0.1", "localhost"):
            reader, writer = await asyncio.open_connection(host, port)
            assert await reader.read() == b"hi"
            writer.close()
        server.close()
        await server.wait_closed()


def test_guard_is_undone() -> None:
    before = socket.socket.connect
    with netguard.guard():
        assert socket.socket.connect is not before
    assert socket.socket.connect is before


def test_is_loopback() -> None:
    assert netguard.is_loopback("127.0.0.1") and netguard.is_loopback("127.8.0.3") and netguard.is_loopback("::1")
    assert netguard.is_loopback("::ffff:127.0.0.1") and netguard.is_loopback("localhost")
    assert not netguard.is_loopback("10.255.255.1") and not netguard.is_loopback("slack.com")
    assert not netguard.is_loopback("0.0.0.0")


def test_ports_for_test_servers_are_outside_the_ephemeral_range_and_never_repeat() -> None:
    # A port from the kernel's ephemeral range can be taken by another test's outgoing connection before the
    # server it was picked for binds it (a simulated vLLM then fails to start).
    from tests.sshd import EPHEMERAL_RANGE, free_port

    low, high = (int(x) for x in EPHEMERAL_RANGE.read_text().split())
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert not [p for p in ports if low <= p <= high]
