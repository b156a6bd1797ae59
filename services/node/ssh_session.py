"""A persistent SSH session: one long-lived channel running a fixed remote loop that answers once per newline.

The scheduler's leader asks the watcher's probe on it (``NodePool.ask``): the script is sent once, each answer
costs one newline and one read. The framing lives here: an answer ends where ``AnswerEnd`` says (the probe's
own trailer, ``services/node/probe``); output nobody asked for makes the session untrustworthy and closes it;
a node that prints something else before it is asked (a shell that refuses the command) is read as a
one-shot command's output would be, once its channel ends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import asyncssh

# A persistent session keeps at most this much of what the node wrote on stderr during one answer (only the
# first line is ever shown, when the node's shell did not run the probe).
SESSION_STDERR_MAX = 4096
AnswerEnd = Callable[[bytearray], int | None]
"""Where the first answer in the bytes read so far ends (the session's own trailer cut off), or None."""


class Session(asyncssh.SSHClientSession[bytes]):
    """One long-lived channel running a fixed remote loop that answers once per newline it reads.

    It holds one of its connection's channel permits from the moment it is opened until the channel is
    closed (by us, by the node, or with the connection): an idle session channel counts against sshd's
    MaxSessions like any other.
    """

    def __init__(self, command: str, end: AnswerEnd, permit: asyncio.Semaphore) -> None:
        self.command = command
        self._end = end
        self._permit: asyncio.Semaphore | None = permit
        self.chan: asyncssh.SSHClientChannel[bytes] | None = None
        self.conn: asyncssh.SSHClientConnection | None = None
        self.out = bytearray()
        self.err = bytearray()
        self.closed = False
        self.exit_status: int | None = None
        self.answers = 0  # answers it gave (0: freshly opened)
        # It printed before it was first asked (a shell that does not run the probe): no answer can be framed;
        # what it prints is kept until it ends, and read as a one-shot probe's output would be.
        self.unasked = False
        self.lost: Exception | None = None  # why the connection under it failed, if it did
        self._waiter: asyncio.Future[int | None] | None = None

    def connection_made(self, chan: asyncssh.SSHClientChannel[bytes]) -> None:
        self.chan = chan

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        if datatype == asyncssh.EXTENDED_DATA_STDERR:
            if len(self.err) < SESSION_STDERR_MAX:
                self.err += data[: SESSION_STDERR_MAX - len(self.err)]
            return
        waiter = self._waiter
        if self.unasked or ((waiter is None or waiter.done()) and not self.answers):
            # Printed before the first trigger (a shell that says why and exits, or says something and hangs):
            # kept whole until the channel ends, as a one-shot probe's output is read when its command ends.
            self.unasked = True
            self.out += data
            return
        if waiter is None or waiter.done():
            self.close()  # output nobody asked for: this session can no longer be trusted to frame answers
            return
        self.out += data
        end = self._end(self.out)
        if end is not None:
            waiter.set_result(end)

    def exit_status_received(self, status: int) -> None:
        self.exit_status = status

    def eof_received(self) -> bool:
        return False  # the loop ended: let the channel close

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.lost = exc
        self._release()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)  # ended before this answer was complete

    def _release(self) -> None:
        permit, self._permit = self._permit, None
        if permit is not None:
            permit.release()

    def close(self) -> None:
        """Close the channel (the node's loop reads end of input and exits); the permit is released when
        the channel is gone."""
        if self.closed:
            return
        self.closed = True
        if self.chan is not None:
            self.chan.close()
        else:
            self._release()
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def answer(self, within_s: float) -> int | None:
        """Ask for one answer (write the trigger): its length in ``out``, or None when the channel ended first;
        ``TimeoutError`` after ``within_s``. (A timer on the future, not ``wait_for``: no task per answer.)"""
        assert self.chan is not None
        if self.closed:
            return None  # it ended, or printed unasked, before this answer was asked for: nothing to wait for
        loop = asyncio.get_running_loop()
        waiter: asyncio.Future[int | None] = loop.create_future()
        self._waiter = waiter
        timer = loop.call_later(within_s, _time_out, waiter)
        if not self.unasked:  # (else: no trigger, only the wait for its end, as for a one-shot command's)
            self.out.clear()
            self.err.clear()
            try:
                self.chan.write(b"\n")
            except OSError:
                # The node closed the channel before it was asked (BrokenPipeError): it printed something else
                # and ended. What it printed may still be held in the channel, unread, and closing the channel
                # from here would throw it away; its end comes after it, so wait for that, as for a one-shot
                # command's.
                self.unasked = True
        try:
            return await waiter
        finally:
            timer.cancel()
            self._waiter = None


def _time_out(waiter: asyncio.Future[int | None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())
