"""The pool's SSH files are parsed once and shared, and read again when they change."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import asyncssh
import pytest

from services.node.ssh_files import SshFiles, _Shared


def _host_line(host: str, port: int) -> str:
    key = asyncssh.generate_private_key("ssh-ed25519")
    return f"[{host}]:{port} {key.export_public_key().decode().strip()}\n"


async def test_one_parse_serves_every_connection_until_the_file_changes(tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text(_host_line("127.0.0.2", 2222))
    files = SshFiles()
    first = await files.known_hosts(str(kh))
    assert all(k is first for k in await asyncio.gather(*(files.known_hosts(str(kh)) for _ in range(50))))
    assert first.match("127.0.0.2", "127.0.0.2", 2222)[0]
    assert not first.match("127.0.0.3", "127.0.0.3", 2222)[0]

    with kh.open("a") as f:
        f.write(_host_line("127.0.0.3", 2222))
    again = await files.known_hosts(str(kh))
    assert again is not first
    assert again.match("127.0.0.3", "127.0.0.3", 2222)[0]


async def test_connections_asking_at_once_share_one_read(tmp_path: Path) -> None:
    reads: list[str] = []

    def read(path: str) -> str:
        reads.append(path)
        return Path(path).read_text()

    f = tmp_path / "f"
    f.write_text("x")
    shared: _Shared[str] = _Shared(read, lambda p: (p,))
    assert set(await asyncio.gather(*(shared.get(str(f)) for _ in range(100)))) == {"x"}
    assert len(reads) == 1


async def test_a_broken_file_fails_every_waiter_and_is_read_again_once_fixed(tmp_path: Path) -> None:
    key = tmp_path / "id"
    key.write_text("not a key\n")
    files = SshFiles()
    results = await asyncio.gather(*(files.client_keys(str(key)) for _ in range(5)), return_exceptions=True)
    assert all(isinstance(r, asyncssh.KeyImportError) for r in results)
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(key))
    os.utime(key, ns=(1, 1))  # even with an old mtime: size and ctime changed
    assert len(await files.client_keys(str(key))) == 1


async def test_a_missing_file_is_an_error_not_an_empty_trust(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        await SshFiles().known_hosts(str(tmp_path / "absent"))
