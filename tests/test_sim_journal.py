"""The simulated node's journalctl in JSON, with cursors and --follow, held to what a real systemd 252 printed.

The truth is ``samples/journal/real-systemd-252.jsonl`` (recorded on the real-systemd tier) and journalctl's
documented behaviour; the simulator's helper shares no code with inferbot, so these tests read its output
with ``json`` alone, never with the product's parser.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from services.sim.node import SimNode
from services.sim.scenarios import KIMI_UNIT, kimi_node
from tests.sshd import free_port

REAL = [json.loads(line) for line in
        (Path(__file__).parent / "samples" / "journal" / "real-systemd-252.jsonl").read_bytes().splitlines()]
FIELDS = "--output-fields=MESSAGE,UNIT,_SYSTEMD_UNIT,INVOCATION_ID,_SYSTEMD_INVOCATION_ID,_PID"


@pytest.fixture
async def sim() -> AsyncIterator[SimNode]:
    root = Path(tempfile.mkdtemp(prefix="inferbot-simj-"))
    os.chmod(root, 0o755)
    node = SimNode(root, kimi_node(fast=True, port=free_port()))
    await node.start()
    await node.wait_for(KIMI_UNIT, "ready", 45)
    yield node
    await node.stop()


async def journalctl(sim: SimNode, *args: str) -> list[dict[str, object]]:
    p = await asyncio.create_subprocess_exec(str(sim.bin / "journalctl"), *args, env={**os.environ, **sim.shell_env()},
                                             stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await p.communicate()
    assert p.returncode == 0, err
    return [json.loads(line) for line in out.splitlines()]


async def test_entries_have_the_fields_and_types_a_real_journalctl_prints(sim: SimNode) -> None:
    got = await journalctl(sim, "-u", KIMI_UNIT, "-a", "-o", "json", FIELDS, "-n", "400")
    by_pid1 = [e for e in got if e.get("_PID") == "1"]
    own = [e for e in got if e.get("_PID") != "1"]
    real_pid1 = {k for e in REAL if e["_PID"] == "1" for k in e} - {"INVOCATION_ID"}  # the simulator has no runs
    real_own = {k for e in REAL if e["_PID"] != "1" for k in e}
    assert by_pid1 and all(set(e) == real_pid1 for e in by_pid1)
    assert own and all(set(e) == real_own for e in own)
    assert all(e["_SYSTEMD_UNIT"] == "init.scope" and e["UNIT"] == KIMI_UNIT for e in by_pid1)
    assert all(isinstance(e[k], str) for e in got for k in e if k != "MESSAGE")
    # A message with a carriage return is an array of bytes, as journald's JSON has it.
    progress = [e["MESSAGE"] for e in own if isinstance(e["MESSAGE"], list)]
    assert progress and all(13 in m for m in progress)  # type: ignore[operator]
    assert all(isinstance(e["MESSAGE"], str) for e in by_pid1)


async def test_a_cursor_is_read_from_its_own_entry_or_after_it_across_a_rotation(sim: SimNode) -> None:
    got = await journalctl(sim, "-u", KIMI_UNIT, "-o", "json", "-n", "5")
    cursor = str(got[0]["__CURSOR"])
    sim.rotate_journal()
    sim.log_line(KIMI_UNIT, "after the rotation")
    at = await journalctl(sim, "-u", KIMI_UNIT, "-o", "json", f"--cursor={cursor}")
    after = await journalctl(sim, "-u", KIMI_UNIT, "-o", "json", f"--after-cursor={cursor}")
    assert [e["__CURSOR"] for e in at][1:] == [e["__CURSOR"] for e in after]
    assert at[0]["__CURSOR"] == cursor and after[-1]["MESSAGE"] == "after the rotation"
    assert [e["__CURSOR"] for e in after][:4] == [e["__CURSOR"] for e in got[1:]]
    sim.vacuum_journal()  # the cursor's file is gone: from the first entry after where it pointed
    gone = await journalctl(sim, "-u", KIMI_UNIT, "-o", "json", f"--cursor={cursor}")
    assert [e["MESSAGE"] for e in gone] == ["after the rotation"]


async def test_follow_reads_on_across_rotations_and_ends_when_its_reader_does(sim: SimNode) -> None:
    p = await asyncio.create_subprocess_exec(
        str(sim.bin / "journalctl"), "--follow", "-o", "json", "--lines=1", f"--unit={KIMI_UNIT}",
        "--grep=^(?:step|Started )", env={**os.environ, **sim.shell_env()}, stdout=asyncio.subprocess.PIPE)
    assert p.stdout is not None
    first = json.loads(await asyncio.wait_for(p.stdout.readline(), 10))
    assert str(first["MESSAGE"]).startswith("Started ")  # the newest line that matches
    for i in range(3):
        sim.log_line(KIMI_UNIT, f"step {i}")
        sim.log_line(KIMI_UNIT, "not matched")
        sim.rotate_journal()
    got = [json.loads(await asyncio.wait_for(p.stdout.readline(), 10)) for _ in range(3)]
    assert [e["MESSAGE"] for e in got] == ["step 0", "step 1", "step 2"]
    seqs = [int(str(e["__CURSOR"]).split(";")[1][2:], 16) for e in [first, *got]]
    assert seqs == sorted(seqs) and len(set(seqs)) == 4  # numbered on across the files
    p.stdout.feed_eof()
    transport = p._transport  # type: ignore[attr-defined]
    transport.get_pipe_transport(1).close()  # the reader goes away
    assert await asyncio.wait_for(p.wait(), 5) == 0


async def test_a_follower_reads_on_across_an_empty_archive_and_a_rotation_before_it_opened_the_new_file(
        sim: SimNode) -> None:
    """Two rotations with no line between leave an empty archive named like the file after it; and a rotation may
    come between a follower closing the old file and opening the new one: it still reads every line, once."""
    sim.log_line(KIMI_UNIT, "step ahead")
    sim.rotate_journal()
    sim.rotate_journal()  # an empty archive, named with the first sequence number of the active file
    p = await asyncio.create_subprocess_exec(
        str(sim.bin / "journalctl"), "--follow", "-o", "json", "--lines=1", f"--unit={KIMI_UNIT}", "--grep=^step",
        env={**os.environ, **sim.shell_env()}, stdout=asyncio.subprocess.PIPE)
    assert p.stdout is not None
    try:
        ahead = json.loads(await asyncio.wait_for(p.stdout.readline(), 10))  # it follows from here on
        assert ahead["MESSAGE"] == "step ahead"
        for i in range(4):
            sim.log_line(KIMI_UNIT, f"step {i}")
            sim.rotate_journal()
            sim.rotate_journal()
        got = [json.loads(await asyncio.wait_for(p.stdout.readline(), 10)) for _ in range(4)]
        assert [e["MESSAGE"] for e in got] == [f"step {i}" for i in range(4)]
    finally:
        p.kill()
        await p.wait()
