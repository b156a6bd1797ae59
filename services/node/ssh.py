"""Pooled SSH access to the nodes (asyncssh): one connection per node, many channels on it.

Host keys are always verified against the configured known_hosts; nothing here can turn that off.
Every failure becomes a ``NodeError`` with a reason a person understands and a fix.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import asyncssh

from config.models import Node
from services.models import CommandResult, NodeError
from services.node.ssh_errors import NodeUnreachable, connect_error, describe_error
from services.node.ssh_files import SshFiles, local_files
from services.node.ssh_session import AnswerEnd, Session

__all__ = ["EXEC_GATE", "MAX_CHANNELS", "QUEUE_WAIT_S", "AnswerEnd", "NodePool", "NodeUnreachable", "busy_error",
           "describe_error"]
_Session = Session  # the name the session's tests knew it by (tests/test_watch_session.py)

log = logging.getLogger("inferbot.ssh")

# OpenSSH allows 10 sessions per connection (MaxSessions); sshd frees a slot a moment after the
# client sees a channel close, so 8 keeps clear of spurious "open failed" under load.
MAX_CHANNELS = 8
# How many commands may be starting at once across the pool (a channel opened, the exec request not yet
# answered). asyncssh keeps an exec request's bytes (the whole probe script) until sshd answers it, and with
# hundreds of nodes those answers queue in the event loop behind the nodes' output: ungated, a question to
# every node holds every request and most of the outputs at once. A command only waits here for its start
# (one round trip); it runs, and its output arrives, beyond the gate. The price is on a slow link, where
# starts go in waves of EXEC_GATE (the README's performance notes have the figures).
EXEC_GATE = 64
# How long a command may wait inside the bot (for one of its node's MAX_CHANNELS, or its turn at EXEC_GATE) before
# the caller is told that the bot is busy (kind "busy"), at least; a command that may take longer than this on its
# node waits as long as it may take (a channel is free again after at most that). That wait is never counted
# against the node's `timeout`: a burst of questions must not make a healthy node read "unreachable".
QUEUE_WAIT_S = 30.0
PREFERRED_CIPHERS = (
    "aes128-gcm@openssh.com", "aes256-gcm@openssh.com", "chacha20-poly1305@openssh.com", "aes256-ctr", "aes128-ctr",
)


def _given(session: asyncssh.SSHClientSession[bytes]) -> Callable[[], asyncssh.SSHClientSession[bytes]]:
    return lambda: session


@dataclass
class _Slot:
    conn: asyncssh.SSHClientConnection | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    channels: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(MAX_CHANNELS))
    session: Session | None = None  # at most one persistent session per connection
    session_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    waiting: int = 0  # callers waiting for one of the channels (the "busy" answer says how many)
    # The last connection attempt that failed: when it ended, and why. Callers that were waiting for it (behind
    # ``lock``) take its answer instead of each trying again for the node's whole timeout, one after the other.
    failed: tuple[float, NodeError] | None = None
    # Counts the starts and ends of commands that may change the node (anything not run ``read_only``): an
    # answer read before one of them may not be handed to a question asked after it (``NodePool.generation``).
    generation: int = 0


class NodePool:
    """Keeps one SSH connection per node and runs commands on it, reconnecting when it drops."""

    def __init__(self, keepalive_s: float = 30.0, wait_s: float = QUEUE_WAIT_S) -> None:
        self._slots: dict[str, _Slot] = {}
        self._keepalive = keepalive_s
        self.wait_s = wait_s  # the least a command waits inside the bot before it is "busy" (QUEUE_WAIT_S)
        self._gate_waiting = 0  # commands waiting for their turn at the exec gate, all nodes together
        self.connects = 0  # how many SSH handshakes were made (the benchmark reports it)
        self.runs = 0
        self.session_opens = 0  # persistent sessions opened: each one channel and one exec request
        self._sessions = False
        self._starting = asyncio.Semaphore(EXEC_GATE)
        self._files = SshFiles()

    @property
    def sessions(self) -> bool:
        """True while persistent sessions may be kept (:meth:`ask`): only the scheduler's leader keeps them."""
        return self._sessions

    def keep_sessions(self, on: bool) -> None:
        """Allow persistent sessions (the scheduler's leader), or stop allowing them and close every open one
        (leadership lost, shutdown): a standby keeps no channel open on any node."""
        self._sessions = on
        if not on:
            self.end_sessions()

    def end_sessions(self) -> None:
        """Close every persistent session (each node's loop ends when its channel does)."""
        for slot in self._slots.values():
            if slot.session is not None:
                slot.session.close()
                slot.session = None

    def _slot(self, node: Node) -> _Slot:
        # Any change to how the node is reached or verified must not reuse the old connection.
        key = f"{node.user}@{node.host}:{node.port}|{node.known_hosts}|{node.key_file}"
        slot = self._slots.get(key)
        if slot is None:
            slot = self._slots[key] = _Slot()
        return slot

    def generation(self, node: Node) -> int:
        """A number that changes whenever a command that may change ``node`` starts or ends on it.

        Equal before and after reading something from the node: no command of this bot could have changed the
        node meanwhile, so what was read may answer a question asked in between (``Cluster.probe_node``).
        """
        return self._slot(node).generation

    async def _connect(self, node: Node, limit_s: float) -> asyncssh.SSHClientConnection:
        known_hosts, key = local_files(node)
        # The handshake gets the node's configured `timeout` (what the answer quotes), never more.
        limit_s = min(limit_s, node.timeout)
        try:
            # Parsed once for the whole pool (see ssh_files); their errors read as asyncssh's own would.
            trusted = await self._files.known_hosts(known_hosts)
            keys = await self._files.client_keys(key) if key is not None else None
            conn = await asyncio.wait_for(
                asyncssh.connect(
                    node.host, port=node.port, username=node.user, client_keys=keys,
                    known_hosts=trusted, agent_path=None, password=None,
                    preferred_auth="publickey", connect_timeout=limit_s,
                    keepalive_interval=self._keepalive, keepalive_count_max=3,
                    config=[],  # the bot's behaviour must not depend on ~/.ssh/config
                    # AES-GCM runs on the CPU's AES instructions; asyncssh's ChaCha20 builds a cipher per
                    # packet, which made it most of the bot's CPU per question. Both are modern AEADs.
                    encryption_algs=PREFERRED_CIPHERS,
                ),
                limit_s,
            )
        except BaseException as e:
            if isinstance(e, asyncio.CancelledError):
                raise
            raise NodeUnreachable(await connect_error(node, e, known_hosts)) from None
        self.connects += 1
        return conn

    async def _connection(self, node: Node, limit_s: float) -> asyncssh.SSHClientConnection:
        """The node's pooled connection, made when there is none.

        Waiting while another caller connects is the bot's own wait (it counts against no timeout); when that
        attempt fails, the callers who waited for it get its answer at once (else each would try again for the
        node's whole timeout, one after the other: a question to a dead node would wait that long per caller).
        """
        slot = self._slot(node)
        asked = time.monotonic()
        async with slot.lock:
            if slot.conn is not None and not slot.conn.is_closed():
                return slot.conn
            if slot.failed is not None and slot.failed[0] >= asked:
                raise NodeUnreachable(slot.failed[1])
            try:
                slot.conn = await self._connect(node, limit_s)
            except NodeUnreachable as e:
                slot.failed = (time.monotonic(), e.error)
                raise
            slot.failed = None
            return slot.conn

    async def _turn(self, node: Node, permits: asyncio.Semaphore, wait_until: float, gate: bool = False) -> None:
        """Take one of ``permits`` (``node``'s channels, or with ``gate`` the pool's exec gate), waiting inside the
        bot at most until ``wait_until`` (``loop.time()``); after that, ``NodeUnreachable`` of kind "busy"."""
        if not permits.locked():
            await permits.acquire()  # free: taken at once
            return
        slot = self._slot(node)
        if gate:
            self._gate_waiting += 1
        else:
            slot.waiting += 1
        try:
            async with asyncio.timeout_at(wait_until):
                await permits.acquire()
        except TimeoutError:
            raise NodeUnreachable(busy_error(node, self._gate_waiting if gate else slot.waiting, gate)) from None
        finally:
            if gate:
                self._gate_waiting -= 1
            else:
                slot.waiting -= 1

    def _wait_until(self, limit: float, wait_s: float | None) -> float:
        """When a command asked now stops waiting inside the bot (``loop.time()``): ``wait_s`` from now, by
        default the pool's wait or the command's own limit, whichever is longer."""
        return asyncio.get_running_loop().time() + (wait_s if wait_s is not None else max(self.wait_s, limit))

    async def run(
        self, node: Node, command: str, limit_s: float | None = None, stdin: str | None = None,
        wait_s: float | None = None, read_only: bool = False,
    ) -> CommandResult:
        """Run one fixed command on ``node``; raise ``NodeUnreachable`` with the reason on failure.

        The node's own time is what ``limit_s`` (default: the node's ``timeout``) bounds: connecting (never
        more than the node's ``timeout``), then the command from the moment it is started. Waiting inside the
        bot — for a connection another caller is making, for one of the node's ``MAX_CHANNELS``, for a turn at
        ``EXEC_GATE`` — is not: after ``wait_s`` of it (default: ``QUEUE_WAIT_S`` or ``limit_s``, the longer)
        the error is of kind "busy", and says so. ``read_only``: the command changes nothing on the node (a
        probe); any other command changes the node's ``generation`` when it starts and when it ends.
        """
        limit = limit_s if limit_s is not None else node.timeout
        started = time.monotonic()
        wait_until = self._wait_until(limit, wait_s)
        slot = self._slot(node)
        if not read_only:
            slot.generation += 1
        try:
            for attempt in (1, 2):
                conn = await self._connection(node, limit)
                await self._turn(node, slot.channels, wait_until)
                try:
                    proc = await self._exec(node, conn, command, stdin, limit, wait_until)
                except (asyncssh.ChannelOpenError, asyncssh.ConnectionLost, asyncssh.DisconnectError,
                        ConnectionResetError, BrokenPipeError) as e:
                    # A pooled connection may have died since it was last used: reconnect once.
                    slot.conn = None
                    if attempt == 2:
                        raise NodeUnreachable(describe_error(node, e, limit)) from None
                    continue
                except (TimeoutError, asyncssh.TimeoutError) as e:
                    raise NodeUnreachable(describe_error(node, e, limit)) from None
                finally:
                    slot.channels.release()
                self.runs += 1
                return CommandResult(
                    exit_status=proc.exit_status,
                    stdout=_text(proc.stdout),
                    stderr=_text(proc.stderr),
                    elapsed_s=time.monotonic() - started,
                )
        finally:
            if not read_only:
                slot.generation += 1
        raise AssertionError("unreachable")  # pragma: no cover

    async def ask(self, node: Node, command: str, end: AnswerEnd, limit_s: float | None = None,
                  wait_s: float | None = None) -> CommandResult:
        """One answer of the persistent session running the fixed ``command`` on ``node`` (opened when there
        is none): one newline written, the answer read up to where ``end`` says it ends. One round trip.

        Failures read as :meth:`run`'s do (``NodeUnreachable``, the same reasons): a session that fails, times
        out (``limit_s``, else the node's timeout) or was cut off is closed, and the next call opens a new
        one; a session that ended while idle (the node restarted, the connection dropped, its process was
        killed) is replaced at once, as :meth:`run` reconnects once. A session that ends while answering
        gives what it printed and its stderr, as a command that exited would (the caller judges the output).
        As for :meth:`run`, waiting inside the bot (for an answer the session is still giving someone else,
        for a channel to open it on) is not the node's time; ``wait_s`` bounds it ("busy").
        """
        if not self._sessions:
            raise RuntimeError("persistent sessions are not allowed on this pool (keep_sessions)")
        limit = limit_s if limit_s is not None else node.timeout
        wait_until = self._wait_until(limit, wait_s)
        started = time.monotonic()
        slot = self._slot(node)
        async with slot.session_lock:  # (waiting here is for another caller's answer: not the node's time)
            for attempt in (1, 2):
                session = await self._session_for(node, slot, command, end, limit, attempt, wait_until)
                if session is None:
                    continue  # the connection had died: reconnected, try once more
                result = await self._answer(node, slot, session, limit, attempt, started)
                if result is not None:
                    return result
        raise AssertionError("unreachable")  # pragma: no cover

    async def _session_for(self, node: Node, slot: _Slot, command: str, end: AnswerEnd, limit: float, attempt: int,
                           wait_until: float) -> Session | None:
        """The node's session running ``command``, opened when there is none it can use; None when the pooled
        connection had died (the caller tries once more)."""
        session = slot.session
        if session is not None and (session.closed or session.command != command or session.conn is not slot.conn):
            session.close()  # ended, or a different probe (the config changed), or an old connection
            session = slot.session = None
        if session is not None:
            return session
        if not self._sessions:  # closed under this call: the lead was lost, or the bot is stopping
            raise NodeUnreachable(NodeError(
                kind="other", reason="the persistent session was closed: this replica stopped leading "
                                     "or is stopping", fix=""))
        return await self._open_session(node, slot, command, end, limit, attempt, wait_until)

    async def _answer(self, node: Node, slot: _Slot, session: Session, limit: float, attempt: int,
                      started: float) -> CommandResult | None:
        """One answer of ``session``; None when it cannot give one and a new session should be asked."""
        try:
            got = await session.answer(limit)  # the node's time: from the trigger on
        except BaseException as e:
            self._drop(slot, session)  # mid-answer: what it prints later must not be read as the next
            if isinstance(e, TimeoutError):
                raise NodeUnreachable(describe_error(node, e, limit)) from None
            raise
        if got is None:
            return self._ended(node, slot, session, limit, attempt, started)
        session.answers += 1
        self.runs += 1
        stdout = session.out[:got].decode("utf-8", "replace")
        stderr = session.err.decode("utf-8", "replace") if session.err else ""
        if not self._sessions:
            self._drop(slot, session)  # leadership was lost while it answered
        return CommandResult(exit_status=None, stdout=stdout, stderr=stderr, elapsed_s=time.monotonic() - started)

    def _ended(self, node: Node, slot: _Slot, session: Session, limit: float, attempt: int,
               started: float) -> CommandResult | None:
        """A session that ended before its answer was complete: what it printed, or None to ask a new one."""
        self._drop(slot, session)
        if session.lost is not None:  # the connection failed under it: as run() does, once more
            slot.conn = None
            if attempt == 2:
                raise NodeUnreachable(describe_error(node, session.lost, limit)) from None
            return None
        if not session.out and session.answers and attempt == 1:
            return None  # it had ended while idle (its process killed): a new one
        # It ended while answering: what it printed, as a command that exited (the caller judges).
        return CommandResult(exit_status=session.exit_status, stdout=_text(bytes(session.out)),
                             stderr=_text(bytes(session.err)), elapsed_s=time.monotonic() - started)

    async def _open_session(self, node: Node, slot: _Slot, command: str, end: AnswerEnd, limit: float,
                            attempt: int, wait_until: float) -> Session | None:
        """Open the persistent session (one channel, held until it closes); None when the pooled connection had
        died and was dropped (the caller tries once more); ``NodeUnreachable`` as :meth:`run` raises it."""
        conn = await self._connection(node, limit)
        await self._turn(node, slot.channels, wait_until)  # released by the session when its channel is gone
        session = Session(command, end, slot.channels)
        try:
            await self._start_session(node, conn, session, command, limit, wait_until)
        except (asyncssh.ChannelOpenError, asyncssh.ConnectionLost, asyncssh.DisconnectError,
                ConnectionResetError, BrokenPipeError) as e:
            session.close()
            slot.conn = None
            if attempt == 2:
                raise NodeUnreachable(describe_error(node, e, limit)) from None
            return None
        except BaseException as e:
            session.close()
            if isinstance(e, TimeoutError | asyncssh.TimeoutError):
                raise NodeUnreachable(describe_error(node, e, limit)) from None
            raise
        session.conn = conn
        slot.session = session
        self.session_opens += 1
        return session

    async def _start_session(self, node: Node, conn: asyncssh.SSHClientConnection, session: Session, command: str,
                             limit: float, wait_until: float) -> None:
        await self._turn(node, self._starting, wait_until, gate=True)  # its start behind EXEC_GATE, as every command's
        try:
            async with asyncio.timeout(limit):
                await conn.create_session(lambda: session, command, encoding=None)
        finally:
            self._starting.release()

    async def open_stream(self, node: Node, command: str,
                          session: Callable[[Callable[[], None]], asyncssh.SSHClientSession[bytes]],
                          limit_s: float | None = None) -> asyncssh.SSHClientChannel[bytes]:
        """Start the long-lived fixed ``command`` on a channel of ``node``'s pooled connection, its output read by
        the session ``session(release)`` makes (the leader's journal stream, ``services/node/journal_stream.py``).

        The channel holds one of the node's ``MAX_CHANNELS`` until the session calls ``release`` (when its channel
        is lost). Only while persistent sessions are kept (the scheduler's leader); failures read as :meth:`run`'s.
        """
        if not self._sessions:
            raise RuntimeError("streams are the leader's: this pool keeps no sessions (keep_sessions)")
        limit = limit_s if limit_s is not None else node.timeout
        wait_until = self._wait_until(limit, None)
        slot = self._slot(node)
        for attempt in (1, 2):
            conn = await self._connection(node, limit)
            await self._turn(node, slot.channels, wait_until)
            released = False

            def release() -> None:
                nonlocal released
                if not released:
                    released = True
                    slot.channels.release()

            made = session(release)
            await self._turn(node, self._starting, wait_until, gate=True)
            try:
                async with asyncio.timeout(limit):
                    chan, _ = await conn.create_session(_given(made), command, encoding=None)
            except (asyncssh.ChannelOpenError, asyncssh.ConnectionLost, asyncssh.DisconnectError,
                    ConnectionResetError, BrokenPipeError, TimeoutError) as e:
                release()
                if isinstance(e, TimeoutError) or attempt == 2:
                    raise NodeUnreachable(describe_error(node, e, limit)) from None
                slot.conn = None  # the pooled connection had died: reconnect once, as run() does
                continue
            except BaseException:
                release()
                raise
            finally:
                self._starting.release()
            return chan
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _drop(slot: _Slot, session: Session) -> None:
        session.close()
        if slot.session is session:
            slot.session = None

    async def _exec(self, node: Node, conn: asyncssh.SSHClientConnection, command: str, stdin: str | None,
                    limit_s: float, wait_until: float) -> asyncssh.SSHCompletedProcess:
        """``conn.run(command, check=False, input=stdin, timeout=limit_s)``, its start behind ``EXEC_GATE``: the
        wait for a turn there is the bot's (``wait_until``), ``limit_s`` runs from the exec request on."""
        await self._turn(node, self._starting, wait_until, gate=True)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit_s
        try:
            async with asyncio.timeout_at(deadline):
                process = await conn.create_process(command, input=stdin)
        finally:
            self._starting.release()
        try:
            return await process.wait(check=False, timeout=max(0.0, deadline - loop.time()))
        except asyncssh.TimeoutError:
            process.close()  # its channel would hold one of sshd's MaxSessions until the command ends
            raise

    async def close(self) -> None:
        """Close every pooled connection (and the sessions on them)."""
        self._sessions = False
        self.end_sessions()
        conns = [s.conn for s in self._slots.values() if s.conn is not None]
        self._slots.clear()
        for c in conns:
            c.close()
        for c in conns:
            try:
                await asyncio.wait_for(c.wait_closed(), 2)
            except (TimeoutError, OSError, asyncssh.Error):
                pass


def _text(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def busy_error(node: Node, waiting: int, gate: bool = False) -> NodeError:
    """The bot itself is the bottleneck (the node was not asked): say so, and never blame the node."""
    questions = f"{waiting} question{'s are' if waiting != 1 else ' is'} waiting"
    if gate:
        reason = f"inferbot is busy: {questions} to be started on the nodes; {node.name} was not asked"
    else:
        reason = (f"inferbot is busy: {questions} for {node.name} (all {MAX_CHANNELS} of its SSH channels are in "
                  f"use); it was not asked")
    return NodeError(kind="busy", reason=reason, fix="try again in a moment")
