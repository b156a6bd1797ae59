"""One node's journal, followed: one ``journalctl --follow`` for all its units over the pooled connection.

The scheduler leader keeps one stream per node (``bot/push.py``). The remote command is a fixed template:
the units and options come from the validated config, the line pattern is the parsers' own
(``services.parse.journal.GREP``: the node sends only the lines an event is read from), and the cursor to
resume after travels on standard input, where the node's shell checks its shape before journalctl sees
it. ``-o json`` with the few fields read, ``--all`` because vLLM's progress lines carry carriage returns
(and a long field would be ``null`` without it). One process on the node for all its units; journalctl
ends when its standard output closes (the channel), so a closed stream leaves nothing behind.

:class:`NodeJournal` keeps it open: the entries it reads are handed over in order, in batches, by a task of
their own (reading never waits for what they cause); after the channel ends it opens again, at once when it
had been up a while, with a growing pause when it keeps failing, from the last entry handed over (in this
process) or the cursor its owner kept (a new process, a new leader). Whether a stream that is open has gone
silent is not decided here: the owner's poll says so (:meth:`NodeJournal.restart`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence

import asyncssh

from config.models import Node
from services.node.ssh import NodePool, NodeUnreachable
from services.parse.journal import FIELDS, GREP, JournalEntry, parse_entry, valid_cursor

log = logging.getLogger("inferbot.journal")

BACKOFF_S = (0.5, 1.0, 2.0, 5.0, 10.0, 30.0)
"""Pauses before opening a stream again after one that ended without being up for :data:`STEADY_S`."""
STEADY_S = 10.0
"""A stream up this long (or that delivered an entry) worked: the next one opens at once."""
LINE_MAX = 1 << 20
"""A line longer than this is not one journalctl writes with the fields asked: skipped."""

Deliver = Callable[[list[JournalEntry]], Awaitable[None]]
"""Handles a batch of entries in order (the looks they call for); returns when they are handled."""
Cursor = Callable[[], Awaitable[str | None]]
"""Where a new stream resumes when this process has handed over nothing yet: the owner's kept cursor."""


def stream_command(units: Sequence[str], grep: bool = True) -> str:
    """The remote command that follows ``units`` (validated unit names) after the cursor read from stdin."""
    options = ["--follow", "--all", "--no-pager", "--output=json", f"--output-fields={','.join(FIELDS)}"]
    if grep:
        options += ["--case-sensitive=yes", f"--grep={GREP}"]
    options += [f"--unit={u}" for u in units]
    # The cursor comes from the store, i.e. from this node: only its own alphabet reaches journalctl. Without
    # one, the newest line is the start: its cursor is where a stream opened again resumes (from the end of the
    # journal instead, what was written while the stream was down would be skipped).
    # --cursor, not --after-cursor: journalctl's --after-cursor skips two entries from where the cursor points,
    # so when the cursor's own entry is gone (vacuumed) the first entry after it is lost; from the cursor's
    # entry on, that entry (already handled) is read again and dropped here instead.
    return ("IFS= read -r c; case $c in ''|*[!0-9a-z=\\;]*) set -- --lines=1;; *) set -- \"--cursor=$c\";; "
            f"esac; exec journalctl {' '.join(shlex.quote(o) for o in options)} \"$@\"")


class _Stream(asyncssh.SSHClientSession[bytes]):
    """Reads one stream's lines into entries of the node's units."""

    def __init__(self, units: frozenset[str], on_entry: Callable[[JournalEntry], None],
                 release: Callable[[], None]) -> None:
        self._units = units
        self._on_entry = on_entry
        self._release = release
        self._buf = bytearray()
        self._skipping = False  # inside a line longer than LINE_MAX
        self.err = bytearray()
        self.entries = 0
        self.exit_status: int | None = None
        self.ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if datatype == asyncssh.EXTENDED_DATA_STDERR:
            if len(self.err) < 4096:
                self.err += data[: 4096 - len(self.err)]
            return
        self._buf += data
        start = 0
        while (end := self._buf.find(b"\n", start)) >= 0:
            if not self._skipping:
                entry = parse_entry(bytes(self._buf[start:end]), self._units)
                if entry is not None:
                    self.entries += 1
                    self._on_entry(entry)
            self._skipping = False
            start = end + 1
        del self._buf[:start]
        if len(self._buf) > LINE_MAX:
            self._buf.clear()
            self._skipping = True

    def exit_status_received(self, status: int) -> None:
        self.exit_status = status

    def detach(self) -> None:
        """Stop reading this stream now, whatever the node does (a stopped process never lets its channel
        close): nothing more is handed over from it; its channel's permit goes when the channel does."""
        self._on_entry = _ignore
        if not self.ended.done():
            self.ended.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self._release()
        if not self.ended.done():
            self.ended.set_result(None)


class NodeJournal:
    """The stream of one node's journal, kept open while :meth:`run` runs (see the module's text)."""

    def __init__(self, pool: NodePool, node: Node, units: Sequence[str], cursor: Cursor, deliver: Deliver) -> None:
        self.pool = pool
        self.node = node
        self.units = frozenset(units)
        self._unit_list = sorted(self.units)
        self._cursor = cursor
        self._deliver = deliver
        self.grep = True
        self._pending: deque[JournalEntry] = deque()
        self._wake = asyncio.Event()
        self._retry = asyncio.Event()
        self._chan: asyncssh.SSHClientChannel[bytes] | None = None
        self._stream: _Stream | None = None
        self._last_received: str | None = None
        self._resume: str | None = None  # the cursor the open stream started at (its entry was handled)
        self._drop_cursor = False
        self.connected_at: float | None = None  # monotonic: since when the open stream has been up
        self.unit_lines: dict[str, float] = {}  # monotonic arrival of the last line of PID 1 about each unit
        self.opens = 0
        self.handed = 0
        self._closing = False
        self._handing: asyncio.Task[None] | None = None

    @property
    def connected(self) -> bool:
        """True while a stream is open."""
        return self._chan is not None

    def restart(self) -> None:
        """End the open stream now and open a new one at once, from where this process got to (the poll saw
        a change it did not say: silent)."""
        self._retry.set()
        self._end_stream()

    def _end_stream(self) -> None:
        if self._stream is not None:
            self._stream.detach()
        if self._chan is not None:
            self._chan.abort()

    def kick(self) -> None:
        """Stop waiting between two attempts: open again now (the poll reached the node)."""
        self._retry.set()

    async def run(self) -> None:
        """Keep the stream open and hand its entries over, until cancelled or closed (:meth:`close`)."""
        self._handing = asyncio.create_task(self._hand_over(), name=f"journal:{self.node.name}")
        try:
            failures = 0
            while not self._closing:
                steady = await self._one_stream()
                failures = 0 if steady else failures + 1
                if failures and not self._closing:
                    self._retry.clear()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._retry.wait(), BACKOFF_S[min(failures, len(BACKOFF_S)) - 1])
                self._retry.clear()
        finally:
            self._end_stream()
            if not self._closing:  # cancelled (the lead was lost): nothing more is handled here
                await _cancel(self._handing)

    async def close(self, drain_s: float) -> None:
        """Stop following (the bot stops): no new stream, the batch being handled may finish within ``drain_s``,
        what was read after it is left to the next start (it resumes from the kept cursor)."""
        self._closing = True
        self._pending.clear()
        self._wake.set()
        self._retry.set()
        self._end_stream()
        handing = self._handing
        if handing is not None:
            await asyncio.wait({handing}, timeout=drain_s)
            await _cancel(handing)

    async def _one_stream(self) -> bool:
        """Open one stream and read it until it ends; True when it worked (up a while, or said something)."""
        cursor = self._last_received or (None if self._drop_cursor else await self._cursor())
        if cursor is not None and not valid_cursor(cursor):
            cursor = None
        self._resume = cursor
        stream: _Stream | None = None

        def session(release: Callable[[], None]) -> _Stream:
            nonlocal stream
            stream = _Stream(self.units, self._received, release)
            return stream

        try:
            chan = await self.pool.open_stream(self.node, stream_command(self._unit_list, self.grep), session)
        except (NodeUnreachable, RuntimeError) as e:
            log.info("journal stream of %s not opened: %s", self.node.name, e)
            return False
        assert stream is not None
        self.opens += 1
        self._chan, self._stream = chan, stream
        opened = self.connected_at = time.monotonic()
        try:
            chan.write(f"{cursor or ''}\n".encode())
            await stream.ended
        finally:
            self._chan, self._stream = None, None
            self.connected_at = None
            chan.abort()
        if not stream.entries:
            self._why_it_ended(stream)
        return stream.entries > 0 or time.monotonic() - opened >= STEADY_S

    def _why_it_ended(self, stream: _Stream) -> None:
        """A stream that ended before saying anything: what journalctl said, and what to do differently."""
        said = stream.err.decode("utf-8", "replace").strip().splitlines()
        first = said[0][:300] if said else f"exit status {stream.exit_status}"
        lowered = " ".join(said).lower()
        if self.grep and ("pattern" in lowered or "pcre" in lowered or "--grep" in lowered):
            self.grep = False  # journalctl without PCRE2: every line of the units travels, and is read here
            log.warning("journalctl on %s cannot filter lines (%r): following every line", self.node.name, first)
        elif "cursor" in lowered and not self._drop_cursor:
            # A cursor this journal does not take: from its newest line (the poll saw what came before).
            self._drop_cursor = True
            log.warning("journalctl on %s refused the stored cursor (%r): following from its newest line",
                        self.node.name, first)
        elif stream.exit_status not in (None, 0):
            log.warning("journal stream of %s ended: %r", self.node.name, first)

    def _received(self, entry: JournalEntry) -> None:
        if entry.cursor == self._resume:
            self._resume = None
            return  # the entry the stream resumed at: handled before
        self._last_received = entry.cursor
        self._drop_cursor = False
        if entry.by_systemd:
            self.unit_lines[entry.unit] = time.monotonic()
        pending = self._pending
        if entry.event is None and pending and pending[-1].event is None:
            pending[-1] = entry  # a line that calls for no look only moves the cursor: keep the newest
        else:
            pending.append(entry)
        self._wake.set()

    async def _hand_over(self) -> None:
        while not self._closing:
            await self._wake.wait()
            self._wake.clear()
            while self._pending and not self._closing:
                batch = list(self._pending)
                self._pending.clear()
                try:
                    await self._deliver(batch)
                except Exception:  # one batch's trouble must not end the stream; the poll covers it
                    log.warning("handling the journal of %s failed", self.node.name, exc_info=True)
                self.handed += len(batch)


def _ignore(entry: JournalEntry) -> None:
    return None


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
