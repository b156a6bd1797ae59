"""config/local_file.py: a file a person names is read only as a regular file of a bounded size.

Real special files stand in for the mistakes: a FIFO nobody writes to (``os.mkfifo``), ``/dev/zero``, a
directory, a listening Unix socket, a ``/proc`` file whose size reads 0. Each case would hang or fill memory
if the module read it as a plain ``open().read()`` does, so each runs under a short alarm.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from config.local_file import (
    FileTooLarge,
    LocalFileError,
    NotRegularFile,
    read_local_bytes,
    read_local_text,
    read_secret_file,
    regular_file_problem,
    size_words,
)


@pytest.fixture(autouse=True)
def _no_hang() -> Iterator[None]:
    """A read that blocks (a FIFO opened without ``O_NONBLOCK``) fails the test in 5 s instead of hanging the run."""
    def timeout(_signum: int, _frame: object) -> None:
        raise TimeoutError("the read blocked")

    old = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(5)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_a_regular_file_is_read_whole_up_to_its_cap(tmp_path: Path) -> None:
    path = tmp_path / "inferbot.toml"
    path.write_bytes(b"x" * 100)
    assert read_local_bytes(path, 100) == b"x" * 100
    assert read_local_text(str(path), 1000) == "x" * 100
    with pytest.raises(FileTooLarge, match="is 100 bytes, more than the 99 bytes it may be"):
        read_local_bytes(path, 99)


def test_a_fifo_is_refused_at_once_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFile, match=r"^is a FIFO \(named pipe\), not a regular file$"):
        read_local_bytes(fifo, 1024)
    assert regular_file_problem(str(fifo), 1024) == "is a FIFO (named pipe), not a regular file"


def test_a_device_a_directory_and_a_socket_say_what_they_are(tmp_path: Path) -> None:
    with pytest.raises(NotRegularFile, match="is a character device"):
        read_local_bytes("/dev/zero", 1 << 20)
    with pytest.raises(NotRegularFile, match="is a directory"):
        read_local_bytes(tmp_path, 1 << 20)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        sock.listen()
        with pytest.raises(NotRegularFile, match="is a socket"):
            read_local_bytes(tmp_path / "sock", 1 << 20)
        assert regular_file_problem(str(tmp_path / "sock"), 1 << 20) == "is a socket, not a regular file"


def test_a_file_whose_size_reads_zero_is_still_read_no_further_than_the_cap() -> None:
    assert os.stat("/proc/self/maps").st_size == 0
    with pytest.raises(FileTooLarge, match=r"^holds more than the 16 bytes it may be$"):
        read_local_bytes("/proc/self/maps", 16)


def test_a_sparse_file_larger_than_the_cap_is_refused_by_its_size_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    with big.open("wb") as f:
        f.truncate(11 << 19)
    assert regular_file_problem(str(big), 4 << 20) == "is 5.5 MiB, more than the 4 MiB it may be"
    with pytest.raises(FileTooLarge) as e:
        read_local_bytes(big, 4 << 20)
    assert (e.value.size, e.value.limit) == (11 << 19, 4 << 20)


def test_a_missing_file_is_no_problem_to_check_but_an_os_error_to_read(tmp_path: Path) -> None:
    assert regular_file_problem(str(tmp_path / "missing"), 10) is None  # the caller words "does not exist"
    with pytest.raises(FileNotFoundError):
        read_local_bytes(tmp_path / "missing", 10)


def test_a_secret_file_is_stripped_and_its_failures_never_quote_it(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("  xoxb-1-2-secretvalue\n")
    assert read_secret_file(str(token)) == "xoxb-1-2-secretvalue"
    token.write_bytes(b"xoxb-1-2-\xffsecretvalue")
    with pytest.raises(LocalFileError) as e:
        read_secret_file(str(token))
    assert str(e.value) == "is not UTF-8 text"
    with pytest.raises(LocalFileError, match=r"^cannot read it \(No such file or directory\)$"):
        read_secret_file(str(tmp_path / "missing"))
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(NotRegularFile):
        read_secret_file(str(tmp_path / "fifo"))


@pytest.mark.parametrize(("n", "words"), [
    (312, "312 bytes"), (64 * 1024, "64 KiB"), (4 << 20, "4 MiB"), (11 << 19, "5.5 MiB"),
    (int(4.6 * (1 << 30)), "4.6 GiB"), ((150 << 20) + (1 << 19), "150 MiB"), (1023, "1023 bytes"),
])
def test_sizes_are_worded_as_people_read_them(n: int, words: str) -> None:
    assert size_words(n) == words
