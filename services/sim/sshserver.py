"""A small SSH server on loopback for ``inferbot demo``: real SSH (asyncssh), key auth, its own host key.

It runs each command with ``/bin/sh -c`` in the simulated node's environment, as the current user,
so the demo needs no sshd, no root and no network beyond 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import asyncssh


class LoopbackSSH:
    """One SSH endpoint standing for one simulated node."""

    def __init__(self, keydir: Path, env: dict[str, str], host: str = "127.0.0.1") -> None:
        self.keydir = keydir
        self.env = env
        self.host = host
        self.port = 0
        self._server: asyncssh.SSHAcceptor | None = None
        self._procs: set[asyncio.subprocess.Process] = set()

    async def start(self, client_public_key: Path) -> None:
        """Listen on a free port, accepting only ``client_public_key``."""
        host_key = asyncssh.generate_private_key("ssh-ed25519")
        self.host_key_path = self.keydir / f"host_key_{id(self)}"
        host_key.write_private_key(str(self.host_key_path))
        self.host_public = host_key.export_public_key().decode().strip()
        self._server = await asyncssh.listen(
            self.host, 0, server_host_keys=[str(self.host_key_path)],
            authorized_client_keys=str(client_public_key), process_factory=self._run,
            allow_pty=False, x11_forwarding=False, agent_forwarding=False, encoding=None,
        )
        self.port = self._server.sockets[0].getsockname()[1]

    def known_hosts_line(self) -> str:
        """The known_hosts entry for this endpoint (``[127.0.0.1]:PORT key``)."""
        return f"[{self.host}]:{self.port} {self.host_public}"

    async def _run(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        command = process.command or "true"
        proc = await asyncio.create_subprocess_exec(
            "/bin/sh", "-c", command, env=self.env, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
        )
        self._procs.add(proc)
        assert proc.stdin and proc.stdout and proc.stderr

        async def feed() -> None:
            assert proc.stdin
            try:
                async for chunk in process.stdin:
                    proc.stdin.write(chunk if isinstance(chunk, bytes) else chunk.encode())
                    await proc.stdin.drain()
            except (ConnectionError, asyncssh.Error):
                pass
            finally:
                with contextlib.suppress(ConnectionError):
                    proc.stdin.close()

        async def pump(src: asyncio.StreamReader, dst: asyncssh.SSHWriter[bytes]) -> None:
            while chunk := await src.read(65536):
                dst.write(chunk)

        feeder = asyncio.create_task(feed())
        try:
            await asyncio.gather(pump(proc.stdout, process.stdout), pump(proc.stderr, process.stderr))
            rc = await proc.wait()
            process.exit(rc if rc >= 0 else 128 - rc)
        except (ConnectionError, asyncssh.Error):
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            process.exit(255)
        finally:
            feeder.cancel()
            self._procs.discard(proc)

    async def stop(self) -> None:
        """Stop listening and end running commands."""
        for p in list(self._procs):
            with contextlib.suppress(ProcessLookupError):
                p.kill()
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
