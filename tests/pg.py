"""A real PostgreSQL server for the tests: Debian's ``postgresql`` binaries, ``initdb`` into a temporary
directory as an unprivileged user, ``pg_ctl`` on 127.0.0.1 with a free port.

Passwords are required on TCP (scram-sha-256), so the tests go through the same password path as a real
deployment. Durability is switched off (``fsync``, ``synchronous_commit``, ``full_page_writes``): the tests
need a real server's semantics (locks, advisory locks, READ COMMITTED races), not crash safety.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg

from tests.sshd import free_port

ADMIN = "postgres"
ADMIN_PASSWORD = "pg-admin-Secret-4f1c"
USER = "inferbot"
PASSWORD = "inferbot-DbPass-9a7e2"  # what INFERBOT_DB_PASSWORD holds in the tests
TEST_USER = "inferbot-test"  # tests/run.sh creates it; initdb refuses to run as root


def bin_dir() -> Path | None:
    """The newest installed PostgreSQL's bin directory, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


def unavailable() -> str | None:
    """Why a server can't be started here (one line), or None."""
    if bin_dir() is None:
        return "PostgreSQL is not installed (apt-get install postgresql; tests/run.sh does it as root)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(TEST_USER)
        except KeyError:
            return f"running as root and there is no {TEST_USER} user to run initdb as (tests/run.sh creates it)"
    return None


class PgServer:
    """One running server; :meth:`database` hands each test a fresh database owned by :data:`USER`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.port = free_port()
        self.bin = bin_dir()
        assert self.bin is not None
        self._names = itertools.count(1)

    def _as_user(self, *argv: str) -> list[str]:
        if os.geteuid() != 0:
            return list(argv)
        return ["runuser", "-u", TEST_USER, "--", *argv]

    def _run(self, *argv: str, timeout: float = 60) -> None:
        out = subprocess.run(self._as_user(*argv), capture_output=True, text=True, timeout=timeout, check=False)
        if out.returncode != 0:
            raise RuntimeError(f"{argv[0]} failed: {out.stderr.strip() or out.stdout.strip()}")

    def init(self) -> PgServer:
        pwfile = self.root / "pwfile"
        pwfile.write_text(ADMIN_PASSWORD + "\n")
        if os.geteuid() == 0:
            shutil.chown(self.root, TEST_USER)
            shutil.chown(pwfile, TEST_USER)
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-U", ADMIN, f"--pwfile={pwfile}",
                  "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync", timeout=120)
        self.start()
        with self.admin() as conn:
            conn.execute(f"CREATE ROLE {USER} LOGIN PASSWORD '{PASSWORD}'")
        return self

    def start(self) -> None:
        opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} -c unix_socket_directories={self.root} "
                "-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200 "
                "-c shared_buffers=32MB")
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "server.log"),
                  "-o", opts, "-w", "-t", "60", "start")

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def admin(self, dbname: str = "postgres") -> psycopg.Connection[tuple[object, ...]]:
        """An autocommit connection as the superuser."""
        return psycopg.connect(host="127.0.0.1", port=self.port, user=ADMIN, password=ADMIN_PASSWORD,
                               dbname=dbname, autocommit=True, connect_timeout=5)

    def database(self) -> str:
        """A new empty database owned by :data:`USER`; returns its name."""
        name = f"t{os.getpid()}_{next(self._names)}"
        with self.admin() as conn:
            conn.execute(f"CREATE DATABASE {name} OWNER {USER} TEMPLATE template0")
        return name

    def url(self, dbname: str, password: bool = True) -> str:
        """The SQLAlchemy URL of ``dbname`` as :data:`USER` (with the password, or as a config would name it)."""
        secret = f":{PASSWORD}" if password else ""
        return f"postgresql+psycopg://{USER}{secret}@127.0.0.1:{self.port}/{dbname}"

    def config_url(self, dbname: str) -> str:
        """What ``[state] url`` says: no password, no driver."""
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{dbname}"

    def terminate(self, dbname: str, application_name: str | None = None) -> int:
        """``pg_terminate_backend`` every connection to ``dbname`` (of ``application_name`` only, if given)."""
        query = "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = %s"
        params: list[str] = [dbname]
        if application_name is not None:
            query += " AND application_name = %s"
            params.append(application_name)
        with self.admin() as conn:
            row = conn.execute(query, params).fetchone()
        return int(row[0]) if row else 0  # type: ignore[call-overload]


@contextlib.contextmanager
def running_server() -> Iterator[PgServer]:
    """Start a server in a temporary directory; stop it and remove everything afterwards."""
    root = Path(tempfile.mkdtemp(prefix="inferbot-pg-"))
    server = PgServer(root)
    try:
        server.init()
        yield server
    finally:
        with contextlib.suppress(Exception):
            server.stop("immediate")
        shutil.rmtree(root, ignore_errors=True)
