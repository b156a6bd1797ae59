"""The measured bot's surroundings: a config of N nodes, its state database made beforehand, its front end loaded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.common import REPO_ROOT


def write_config(path: Path, n: int, hosts: list[tuple[str, int]] | None, key_file: str, known_hosts: str,
                 state_dir: Path, unit: str, user: str = "inferbot") -> None:
    """An inferbot TOML of ``n`` nodes, each with one Kimi service (``hosts``: their sshd addresses; fake ones
    when None)."""
    out: list[str] = []
    for i in range(n):
        host, port = hosts[i] if hosts else (f"127.0.{1 + i // 250}.{2 + i % 250}", 22)
        out += ["[[nodes]]", f'name = "node-{i + 1:03d}"', f'host = "{host}"', f"port = {port}",
                f'user = "{user}"', f'key_file = "{key_file}"', f'known_hosts = "{known_hosts}"',
                'timeout = "30s"', ""]
    for i in range(n):
        out += ["[[services]]", f'name = "kimi-{i + 1:03d}"', f'node = "node-{i + 1:03d}"', f'unit = "{unit}"',
                'bench_dir = "~/bench"', ""]
    out += ["[state]", f'dir = "{state_dir}"', ""]
    path.write_text("\n".join(out))


def prepare_store(config_path: Path) -> None:
    """Create the state database in another process, as a serving bot finds it when it restarts.

    (Creating the schema imports Alembic; a restarted bot finds it current and never does.)
    """
    code = ("import asyncio, sys\nfrom bot.app import open_store\nfrom config.loader import load_config\n"
            "async def main() -> None:\n    s = open_store(load_config(sys.argv[1]))\n    await s.prepare()\n"
            "    await s.close()\nasyncio.run(main())\n")
    subprocess.run([sys.executable, "-c", code, str(config_path)], check=True, cwd=REPO_ROOT)


def import_front_end() -> bool:
    """Load the Slack front end, as the serving bot has it loaded; False when it cannot be imported."""
    try:
        import bot.slack.app  # noqa: F401
    except Exception:
        return False
    return True
