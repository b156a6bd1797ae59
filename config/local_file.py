"""Files a person names on this machine (the config, secret files, SSH keys): regular files of a bounded size only.

``--config /dev/zero`` would be read until memory runs out, and a FIFO would block the command forever
waiting for a writer. Every local read of a path taken from the command line, the environment or the config
goes through here: a FIFO is opened without waiting for a writer (``O_NONBLOCK``) and refused, as is a device,
a directory or a socket, and no more than the cap is ever read (``/proc`` files report size 0: the read itself
is bounded too). The errors are one line of words a caller puts after the path.
"""

from __future__ import annotations

import errno
import os
import stat

CONFIG_MAX_BYTES = 4 * 1024 * 1024
"""The largest config read: ~11,000 nodes with a service each (a 1,024-node config is ~0.36 MiB)."""
SECRET_MAX_BYTES = 64 * 1024
"""The largest secret file read (``SLACK_BOT_TOKEN_FILE``, ``INFERBOT_DB_PASSWORD_FILE``, …)."""
SSH_KEY_MAX_BYTES = 1024 * 1024
"""The largest SSH key file (and its ``.pub`` / ``-cert.pub``) handed to asyncssh; an RSA 16384 key is ~12 KiB."""
KNOWN_HOSTS_MAX_BYTES = 16 * 1024 * 1024
"""The largest known_hosts handed to asyncssh (~100,000 hashed host lines)."""

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class LocalFileError(Exception):
    """A named file that is not a regular file, or is larger than its cap; ``str`` is the words after the path."""


class NotRegularFile(LocalFileError):
    """The path names a directory, FIFO, device or socket."""

    def __init__(self, kind: str) -> None:
        super().__init__(f"is {kind}, not a regular file")
        self.kind = kind


class FileTooLarge(LocalFileError):
    """The file holds more than the cap allows."""

    def __init__(self, size: int | None, limit: int) -> None:
        held = f"is {size_words(size)}, more than" if size is not None else "holds more than"
        super().__init__(f"{held} the {size_words(limit)} it may be")
        self.size, self.limit = size, limit


def size_words(n: int) -> str:
    """``4 MiB``, ``64 KiB``, ``4.6 GiB``, ``312 bytes``."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            v = n / size
            return f"{v:.0f} {unit}" if v == int(v) or v >= 100 else f"{v:.1f} {unit}"
    return f"{n} bytes"


def _not_regular(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a file")


def regular_file_problem(path: str, limit: int) -> str | None:
    """Why ``path`` may not be read (``"is a FIFO (named pipe), not a regular file"``), or None.

    None also when it does not exist or can't be stat'ed: for a file another library opens (SSH keys and
    known_hosts, asyncssh's), whose callers say "does not exist" in their own words. Never opens the file.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    kind = _not_regular(st.st_mode)
    if kind is not None:
        return str(NotRegularFile(kind))
    if st.st_size > limit:
        return str(FileTooLarge(st.st_size, limit))
    return None


def read_local_bytes(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them.

    Raises :class:`NotRegularFile`, :class:`FileTooLarge`, or the ``OSError`` of opening it
    (``FileNotFoundError``, ``PermissionError``, …). Never blocks on a FIFO; reads at most ``limit + 1`` bytes.
    """
    try:
        # O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer; fstat then
        # refuses it. O_NOCTTY: a terminal device never becomes the process's controlling terminal.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ENXIO:  # a socket (or a device without a driver): say what it is when we can
            kind = _kind_of(path)
            if kind is not None:
                raise NotRegularFile(kind) from None
        raise
    try:
        st = os.fstat(fd)
        kind = _not_regular(st.st_mode)
        if kind is not None:
            raise NotRegularFile(kind)
        if st.st_size > limit:
            raise FileTooLarge(st.st_size, limit)
        chunks: list[bytes] = []
        held = 0
        while True:
            chunk = os.read(fd, min(1 << 16, limit + 1 - held))
            if not chunk:
                break
            chunks.append(chunk)
            held += len(chunk)
            if held > limit:  # it grew, or it is a /proc file whose size reads 0
                raise FileTooLarge(None, limit)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _kind_of(path: str | os.PathLike[str]) -> str | None:
    try:
        return _not_regular(os.stat(path).st_mode)
    except OSError:
        return None


def read_local_text(path: str | os.PathLike[str], limit: int) -> str:
    """:func:`read_local_bytes` decoded as UTF-8 (``UnicodeDecodeError`` for other bytes)."""
    return read_local_bytes(path, limit).decode("utf-8")


def read_secret_file(path: str) -> str:
    """The stripped contents of a secret file (``SLACK_BOT_TOKEN_FILE``, ``INFERBOT_DB_PASSWORD_FILE``, …).

    Every failure is a :class:`LocalFileError` whose words never quote the file's contents.
    """
    try:
        return read_local_text(path, SECRET_MAX_BYTES).strip()
    except UnicodeDecodeError:
        raise LocalFileError("is not UTF-8 text") from None
    except LocalFileError:
        raise
    except OSError as e:
        raise LocalFileError(f"cannot read it ({e.strerror})") from None
