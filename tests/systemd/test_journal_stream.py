"""The journal stream against a real systemd 252 and journald (issue 26), over real SSH with the product's client.

A container of its own (this module rotates and vacuums its journal, which the tier's shared container must
keep): two units running the stand-in vLLM server, ``Restart=on-failure``. What is checked is what the
simulator cannot vouch for: journalctl's own ``--follow``, ``-o json``, ``--grep`` and ``--after-cursor`` with
real cursors, across ``journalctl --rotate`` and ``--vacuum-files``; one journalctl for every unit, gone with
its channel; and the bot saying a crash at systemd's exit line, whatever ``RestartSec=``.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from config.models import BotConfig
from services.node.journal_stream import NodeJournal
from services.node.ssh import NodePool
from services.parse.journal import JournalEntry, valid_cursor
from tests.sshd import ClientKey
from tests.systemd import container as ct
from tests.systemd.conftest import STANDIN
from tests.test_restart import bot, until

UNITS = ("vx.service", "vy.service")
RESTART_SEC = 5


@dataclass
class JournalNode:
    container: ct.Container
    key: ClientKey
    known_hosts: Path
    ports: dict[str, int]

    def config(self, state_dir: Path, **extra: object) -> BotConfig:
        return BotConfig.model_validate({
            "nodes": [{"name": "real", "host": "127.0.0.1", "port": self.container.ssh_port, "user": ct.LOGIN_USER,
                       "key_file": str(self.key.private), "known_hosts": str(self.known_hosts), "timeout": 15}],
            "services": [{"name": u.removesuffix(".service"), "node": "real", "unit": u,
                          "readiness": {"smoke": False}} for u in UNITS],  # the stand-in serves no completions
            "state": {"dir": str(state_dir)}, **extra,
        })

    def journalctl(self) -> list[int]:
        """The login user's journalctl processes on the node."""
        out = self.container.run("pgrep", "-u", ct.LOGIN_USER, "-x", "journalctl", check=False).stdout
        return [int(p) for p in out.split()]

    def archives(self) -> set[str]:
        """The node's archived system journal files."""
        out = self.container.run("sh", "-c", "ls /var/log/journal/*/").stdout.split()
        return {f for f in out if f.startswith("system@")}

    def lines(self, unit: str, text: str, after: float = 0.0) -> list[float]:
        """When (epoch seconds) journald took each line of ``unit`` containing ``text``."""
        out = self.container.run("journalctl", "-u", unit, "-o", "json", "--output-fields=MESSAGE", "-a").stdout
        times = []
        for line in out.splitlines():
            e = json.loads(line)
            msg = e["MESSAGE"] if isinstance(e["MESSAGE"], str) else bytes(e["MESSAGE"]).decode()
            t = int(e["__REALTIME_TIMESTAMP"]) / 1e6
            if text in msg and t > after:
                times.append(t)
        return times


def _prepare(ports: dict[str, int]) -> object:
    def prepare(root: Path) -> None:
        text = STANDIN.read_text().replace("#!/usr/bin/python3", "#!/opt/venv/bin/python", 1)
        (root / "usr/local/bin/vllm").write_text(text)
        (root / "usr/local/bin/vllm").chmod(0o755)
        wants = root / "etc/systemd/system/multi-user.target.wants"
        wants.mkdir(exist_ok=True)
        for unit in UNITS:
            (root / "etc/systemd/system" / unit).write_text(
                f"[Unit]\nDescription=stand-in {unit}\n\n[Service]\n"
                f"ExecStart=/usr/local/bin/vllm serve /models/{unit} --port {ports[unit]}\n"
                f"Restart=on-failure\nRestartSec={RESTART_SEC}\n\n[Install]\nWantedBy=multi-user.target\n")
            (wants / unit).symlink_to(f"../{unit}")
    return prepare


@pytest.fixture(scope="module")
def journal_node() -> Iterator[JournalNode]:
    why = ct.missing_requirements()
    if why is not None:
        pytest.skip(f"real-systemd tier {why}")
    d = Path(tempfile.mkdtemp(prefix="inferbot-journal-"))
    key = ClientKey(d)
    ports = {u: ct.free_port() for u in UNITS}
    with ct.booted(key.public.read_text(), _prepare(ports)) as c:  # type: ignore[arg-type]
        known_hosts = d / "known_hosts"
        known_hosts.write_text(c.known_hosts_line() + "\n")
        c.wait_active(list(UNITS))
        c.wait_listening(list(ports.values()))
        yield JournalNode(container=c, key=key, known_hosts=known_hosts, ports=ports)
    shutil.rmtree(d, ignore_errors=True)


class Followed:
    """A NodeJournal over its own pool, recording what it hands over and keeping its cursor as the store would."""

    def __init__(self, node: JournalNode, tmp: Path, cursor: str | None = None) -> None:
        self.pool = NodePool()
        self.pool.keep_sessions(True)
        self.kept = cursor
        self.entries: list[JournalEntry] = []
        cfg = node.config(tmp)
        self.journal = NodeJournal(self.pool, cfg.nodes[0], list(UNITS), self._cursor, self._deliver)
        self.task = asyncio.create_task(self.journal.run())

    async def _cursor(self) -> str | None:
        return self.kept

    async def _deliver(self, entries: list[JournalEntry]) -> None:
        self.entries.extend(entries)
        self.kept = entries[-1].cursor

    def events(self, unit: str) -> list[str]:
        return [str(e.event) for e in self.entries if e.unit == unit and e.event is not None]

    async def close(self) -> None:
        await self.journal.close(2.0)
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self.pool.close()


async def test_one_journalctl_follows_every_unit_with_real_cursors_across_a_rotation_and_a_vacuum(
        journal_node: JournalNode, tmp_path: Path) -> None:
    c = journal_node.container
    first = Followed(journal_node, tmp_path)
    try:
        await until(lambda: first.journal.connected and bool(first.entries), 15, "the stream's newest line")
        assert len(journal_node.journalctl()) == 1  # one process for both units
        before = len(first.events("vy.service"))  # the newest line, where a stream without a cursor starts
        c.run("systemctl", "restart", "vy.service")
        await until(lambda: "ready" in first.events("vy.service")[before:], 20, "vy's restart in the stream")
        # stopping, deactivated, stopped, started, then the server's own line
        assert first.events("vy.service")[before:] == ["unit_changed"] * 4 + ["ready"]
        cursors = [e.cursor for e in first.entries]
        assert all(valid_cursor(x) for x in cursors) and len(set(cursors)) == len(cursors)
    finally:
        await first.close()
    resume_at = first.kept
    assert resume_at is not None
    await until(lambda: not journal_node.journalctl(), 10, "journalctl to end with its channel")

    # While nobody follows: the file holding the cursor is archived; vx crashes (its lines go to the next
    # file, archived in turn); then the first archive is vacuumed away, the crash's kept.
    rotated = time.time()
    c.run("journalctl", "--rotate")
    await asyncio.sleep(1.5)
    crashed = time.time()
    # Killed behind systemd's back: the first line after the cursor is systemd's exit line itself.
    c.run("sh", "-c", "kill -9 \"$(systemctl show -P MainPID vx.service)\"")
    await until(lambda: bool(journal_node.lines("vx.service", "Failed with result", after=crashed)), 10, "the crash")
    c.run("journalctl", "--rotate")
    before = journal_node.archives()
    # journald vacuums by the time of an archive's first entry: the cursor's archive began long before.
    gone = c.run("journalctl", f"--vacuum-time={time.time() - rotated + 0.5:.1f}s").stderr
    assert len(before - journal_node.archives()) == 1, gone  # the archive that held the cursor's entry, only

    again = Followed(journal_node, tmp_path, cursor=resume_at)
    try:
        await until(lambda: "main_exited" in again.events("vx.service"), 15, "the crash from the cursor on")
        # From the cursor on: vx's crash, and nothing of vy's restart that was handed over before it.
        assert again.events("vy.service") == []
        assert again.events("vx.service")[:2] == ["main_exited", "unit_changed"]
        # systemd starts vx again after RestartSec=: the same stream says it.
        await until(lambda: "ready" in again.events("vx.service"), RESTART_SEC + 15, "vx started again")
        run = {e.invocation for e in again.entries if e.unit == "vx.service" and e.event == "ready"}
        started = {e.invocation for e in again.entries if e.unit == "vx.service" and e.message.startswith("Started")}
        assert run and run == started  # PID 1's line and the unit's own name the same run
    finally:
        await again.close()
    await until(lambda: not journal_node.journalctl(), 10, "journalctl to end with its channel")


async def test_a_crash_is_said_at_systemds_exit_line_before_restart_sec(journal_node: JournalNode,
                                                                         tmp_path: Path) -> None:
    c = journal_node.container
    c.wait_active(list(UNITS))
    cfg = journal_node.config(tmp_path, notify={"channel": "C0NOTIFY"},
                              watch={"poll": "1h", "interval": "1h", "safety_interval": "1h", "max_load": "60s"})
    async with bot(cfg, watch=True) as b:
        push = b.scheduler.push
        assert push is not None
        await until(lambda: "real" in push.journals and push.journals["real"].connected, 20, "the stream")
        await until(lambda: push._looked.get("real") is not None, 20, "the watcher's first look")
        await asyncio.sleep(1.0)
        t0 = time.time()
        # The main process dies by itself, as in a crash (systemctl kill also signals the unit's other
        # processes, and under load systemd 252 in the container could fail that part with EIO).
        c.run("sh", "-c", "kill -9 \"$(systemctl show -P MainPID vx.service)\"")
        await until(lambda: any("restarted (not by inferbot)" in t for t in b.notifier.texts()), 15, "the ⚠️")
        said = time.time()
        (exited,) = journal_node.lines("vx.service", "Main process exited", after=t0)
        assert said - exited < RESTART_SEC  # before systemd even started it again
        assert not journal_node.lines("vx.service", "Scheduled restart job", after=t0)
        await until(lambda: any("is ready" in t for t in b.notifier.texts()), RESTART_SEC + 20, "the ✅")
        await asyncio.sleep(1.0)
        texts = b.notifier.texts("C0NOTIFY")
        assert len([t for t in texts if "restarted (not by inferbot)" in t]) == 1
        assert len([t for t in texts if "is ready" in t]) == 1
        assert not [t for t in texts if "failed" in t]
