"""A program that records the argv it was started with: the truth of what a launcher or a shell really runs."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

RECORDER = """#!/bin/sh
# Appends the argv it was started with (NUL-separated words, one record per line) to $ARGV_LOG.
{ printf '%s\\0' "$0" "$@"; printf '\\n'; } >> "$ARGV_LOG"
"""

Run = Callable[..., list[list[str]]]
"""run(argv or None, script=None, names=(...)) -> every argv the recorder programs were started with."""


@pytest.fixture
def recorded(tmp_path: Path) -> Run:
    """Runs a command line for real with recorder programs in PATH (under the given names) and returns the
    argvs they were started with, in the order they wrote them."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "argv.log"

    def run(argv: list[str], names: tuple[str, ...] = ("vllm",), env: dict[str, str] | None = None) -> list[list[str]]:
        for name in names:
            program = bin_dir / name
            program.write_text(RECORDER)
            program.chmod(program.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        log.write_bytes(b"")
        environ = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "ARGV_LOG": str(log), **(env or {})}
        subprocess.run(argv, env=environ, cwd=tmp_path, check=True, timeout=30, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL)
        records = [r for r in log.read_bytes().split(b"\0\n") if r]
        return [[w.decode() for w in r.split(b"\0")] for r in records]

    return run
