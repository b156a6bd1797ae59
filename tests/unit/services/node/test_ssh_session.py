"""The persistent session (services/node/ssh_session.py) on a real sshd, in the orders a loaded bot meets.

A node whose account runs something other than the probe (``ForceCommand``) prints a line and closes the
channel at once. When the bot is slow, its line, its end and the answer to the exec request arrive in one
read: the channel holds them until asyncssh starts reading it, after the session was handed to the pool.
The first answer is asked for then, on a channel the node has already closed.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from config.models import Node
from services.node.probe import session_answer_end
from services.node.ssh import NodePool
from services.node.ssh_session import Session
from tests.sshd import ClientKey, Sshd, start_sshd

pytestmark = pytest.mark.filterwarnings("ignore::ResourceWarning")

REFUSAL = "this account runs no commands"


@pytest.fixture
def refusing_node(client_key: ClientKey, ssh_user: str, tmp_path: Path) -> Iterator[Node]:
    """A node whose sshd runs ``echo REFUSAL`` whatever the bot asks (and so ends every channel at once)."""
    sshd: Sshd = start_sshd(client_key, {"LC_ALL": "C"}, extra_config=f"ForceCommand echo '{REFUSAL}'\n")
    try:
        (tmp_path / "known_hosts").write_text(sshd.known_hosts_line() + "\n")
        yield Node(name="gpu-a", host=sshd.host, port=sshd.port, user=sshd.user, key_file=str(client_key.private),
                   known_hosts=str(tmp_path / "known_hosts"), timeout=8.0)
    finally:
        sshd.stop()


class _SlowReader(NodePool):
    """Starts reading a new session's channel only once the node has closed it: everything the node sent is
    still held in the channel when the first answer is asked for (the order of a loaded bot, made certain)."""

    async def _start_session(self, node: Node, conn: asyncssh.SSHClientConnection, session: Session, command: str,
                             limit: float, wait_until: float) -> None:
        await super()._start_session(node, conn, session, command, limit, wait_until)
        chan = session.chan
        assert chan is not None
        chan.pause_reading()  # (asyncssh's own start of reading has not run yet: nothing awaited since)
        deadline = time.monotonic() + 5
        while not chan.is_closing():  # the node's close arrived (its line and its end are held)
            assert time.monotonic() < deadline, "the node did not close the channel"
            await asyncio.sleep(0.01)
        asyncio.get_running_loop().call_soon(chan.resume_reading)  # right after the answer is asked for


async def test_a_node_that_closed_before_the_first_answer_still_reads_as_what_it_printed(
        refusing_node: Node) -> None:
    one_shot = NodePool()
    pool = _SlowReader()
    pool.keep_sessions(True)
    try:
        shot = await one_shot.run(refusing_node, "true", read_only=True)
        answer = await asyncio.wait_for(pool.ask(refusing_node, "the probe loop", session_answer_end), 15)
    finally:
        await pool.close()
        await one_shot.close()
    assert shot.stdout == f"{REFUSAL}\n"
    # What the node printed, as the one-shot command read it (it was thrown away with the channel before).
    assert answer.stdout == shot.stdout
    assert pool.session_opens == 1
