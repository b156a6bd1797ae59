"""A network guard for tests: any attempt to reach an address outside loopback fails loudly.

``install()`` patches ``socket.socket.connect``/``connect_ex``/``sendto``, ``socket.getaddrinfo`` (so a
name that is not ``localhost`` is never even looked up) and asyncio's ``create_connection``; it returns a
function that undoes it. ``guard()`` is the same as a context manager. Unix sockets are allowed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
from collections.abc import Callable, Iterator
from typing import Any

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


class NetworkBlocked(OSError):
    """Raised instead of reaching a non-loopback address."""


def is_loopback(host: object) -> bool:
    """True for 127.0.0.0/8, ::1, and the usual names for them."""
    if host is None:
        return True  # bind/listen without a host
    if isinstance(host, bytes):
        host = host.decode()
    if not isinstance(host, str):
        return False
    h = host.strip("[]").split("%")[0]
    if h.lower() in LOOPBACK_NAMES:
        return True
    try:
        ip = ipaddress.ip_address(h)
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def _check_address(address: Any, family: int | None = None) -> None:
    if family == getattr(socket, "AF_UNIX", object()) or isinstance(address, str | bytes):
        return  # a Unix socket path
    host = address[0] if isinstance(address, tuple) and address else address
    if not is_loopback(host):
        raise NetworkBlocked(f"test network guard: connection to {address!r} refused (only loopback is allowed)")


def install() -> Callable[[], None]:
    """Patch the socket layer; returns the function that restores it."""
    orig_connect = socket.socket.connect
    orig_connect_ex = socket.socket.connect_ex
    orig_sendto = socket.socket.sendto
    orig_getaddrinfo = socket.getaddrinfo
    orig_create_connection = asyncio.BaseEventLoop.create_connection
    # The patches: each checks the address, then calls the original.

    def connect(self: socket.socket, address: Any) -> None:
        _check_address(address, self.family)
        return orig_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        _check_address(address, self.family)
        return orig_connect_ex(self, address)

    def sendto(self: socket.socket, *args: Any) -> int:
        _check_address(args[-1], self.family)
        return orig_sendto(self, *args)

    def getaddrinfo(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in ("", b"") and not is_loopback(host):  # "" = any local address (binding)
            raise NetworkBlocked(f"test network guard: lookup of {host!r} refused (only loopback is allowed)")
        return orig_getaddrinfo(host, *args, **kwargs)

    async def create_connection(self: asyncio.BaseEventLoop, protocol_factory: Any, host: Any = None,
                                port: Any = None, *args: Any, **kwargs: Any) -> Any:
        if host is not None and not is_loopback(host):
            raise NetworkBlocked(f"test network guard: connection to {host!r} refused (only loopback is allowed)")
        return await orig_create_connection(self, protocol_factory, host, port, *args, **kwargs)

    patches: list[tuple[object, str, object]] = [
        (socket.socket, "connect", connect),
        (socket.socket, "connect_ex", connect_ex),
        (socket.socket, "sendto", sendto),
        (socket, "getaddrinfo", getaddrinfo),
        (asyncio.BaseEventLoop, "create_connection", create_connection),
    ]
    originals = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    for obj, name, new in patches:
        setattr(obj, name, new)

    def uninstall() -> None:
        for obj, name, old in reversed(originals):
            setattr(obj, name, old)

    return uninstall


@contextlib.contextmanager
def guard() -> Iterator[None]:
    """``install()`` for the duration of a ``with`` block."""
    uninstall = install()
    try:
        yield
    finally:
        uninstall()


install_guard = guard  # the name tests/conftest.py uses
