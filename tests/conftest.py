"""Shared fixtures: simulated vLLM nodes behind a real OpenSSH sshd, and the loopback-only network guard."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from config.models import BotConfig, Node, Service
from services.sim.node import SimNode
from services.sim.scenarios import NodeScenario
from tests.netguard import guard
from tests.pg import PgServer, running_server
from tests.pg import unavailable as pg_unavailable
from tests.sshd import ClientKey, Sshd, login_user, sshd_available, start_sshd


@pytest.fixture(scope="session", autouse=True)
def _loopback_only() -> Iterator[None]:
    """Every test fails if any code tries to reach an address outside loopback."""
    with guard():
        yield


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A real PostgreSQL server on 127.0.0.1 for the whole run (tests/pg.py); skipped where it can't run."""
    why = pg_unavailable()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    with running_server() as server:
        yield server


@pytest.fixture(scope="session")
def client_key() -> Iterator[ClientKey]:
    """The bot's SSH key pair for the whole run."""
    d = Path(tempfile.mkdtemp(prefix="inferbot-key-"))
    yield ClientKey(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture(scope="session")
def ssh_user() -> str:
    """The user SSH logs in as (unprivileged when the tests run as root)."""
    if not sshd_available():
        if os.environ.get("CI"):
            pytest.fail("openssh-server is not installed: run the README's test command (bash tests/run.sh)")
        pytest.skip("openssh-server is not installed (bash tests/run.sh installs it)")
    return login_user()


@dataclass
class SimCluster:
    """Simulated nodes behind real sshd, and the config that reaches them."""

    config: BotConfig
    sims: dict[str, SimNode] = field(default_factory=dict)
    sshds: dict[str, Sshd] = field(default_factory=dict)
    known_hosts: Path = Path()

    def node(self, name: str) -> Node:
        """The config of node ``name``."""
        return self.config.node(name)


MakeCluster = Callable[..., Awaitable[SimCluster]]


@pytest.fixture
async def make_cluster(client_key: ClientKey, ssh_user: str) -> AsyncIterator[MakeCluster]:
    """Factory: ``await make_cluster({"gpu-a": scenario}, services=[...], **config)`` → ``SimCluster``.

    ``services`` are dicts of ``Service`` fields; by default one service per unit, named after the
    node's first unit (``kimi`` for the Kimi unit, else the unit name without ``.service``).
    """
    sims: list[SimNode] = []
    sshds: list[Sshd] = []
    roots: list[Path] = []
    run_as = ssh_user if os.geteuid() == 0 else None

    async def make(
        nodes: dict[str, NodeScenario], services: list[dict[str, Any]] | None = None, **config: Any
    ) -> SimCluster:
        cluster = SimCluster(config=BotConfig())
        kh_dir = Path(tempfile.mkdtemp(prefix="inferbot-kh-"))
        roots.append(kh_dir)
        known_hosts = kh_dir / "known_hosts"
        node_models: list[Node] = []
        default_services: list[dict[str, Any]] = []
        for name, scenario in nodes.items():
            root = Path(tempfile.mkdtemp(prefix=f"inferbot-sim-{name}-"))
            os.chmod(root, 0o755)
            roots.append(root)
            sim = SimNode(root, scenario, run_as=run_as)
            sims.append(sim)
            await sim.start()
            sshd = start_sshd(client_key, sim.shell_env())
            sshds.append(sshd)
            with known_hosts.open("a") as f:
                f.write(sshd.known_hosts_line() + "\n")
            node_models.append(Node(name=name, host=sshd.host, port=sshd.port, user=sshd.user,
                                    key_file=str(client_key.private), known_hosts=str(known_hosts), timeout=8))
            cluster.sims[name] = sim
            cluster.sshds[name] = sshd
            for u in scenario.units:
                svc = "kimi" if "kimi" in u.name else u.name.removesuffix(".service").replace("@", "-")
                default_services.append({"name": svc, "node": name, "unit": u.name})
        state_dir = Path(tempfile.mkdtemp(prefix="inferbot-state-"))
        roots.append(state_dir)
        cfg: dict[str, Any] = {"state": {"dir": str(state_dir)}, **config}
        cluster.config = BotConfig.model_validate({
            "nodes": [n.model_dump() for n in node_models],
            "services": services if services is not None else default_services,
            **cfg,
        })
        cluster.known_hosts = known_hosts
        return cluster

    yield make
    for sim in sims:
        await sim.stop()
    for s in sshds:
        s.stop()
    for r in roots:
        shutil.rmtree(r, ignore_errors=True)


def service(cluster: SimCluster, name: str) -> Service:
    """The configured service called ``name``."""
    return next(s for s in cluster.config.services if s.name == name)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``--dist loadgroup``), the real-systemd tier runs on one worker: its booted container
    and the cached root file system are one per run."""
    systemd = Path(__file__).parent / "systemd"
    for item in items:
        if systemd in item.path.parents:
            item.add_marker(pytest.mark.xdist_group("systemd"))
