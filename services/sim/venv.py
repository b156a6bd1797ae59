"""The simulated node's vLLM venv as a real venv, with a ``vllm`` package whose parser is the simulator's own."""

from __future__ import annotations

import os
import sys
from pathlib import Path

SIM_DIR = Path(__file__).resolve().parent


def write_vllm_package(venv: Path, version: str) -> None:
    """Make ``venv`` a venv (``pyvenv.cfg``, system site-packages kept) holding a ``vllm`` package whose parser is
    the simulator's own table (``services/sim/vllm_cli.py``): what the node-side parser check imports."""
    real = Path(os.path.realpath(sys.executable))
    (venv / "pyvenv.cfg").write_text(f"home = {real.parent}\ninclude-system-site-packages = true\n"
                                     f"version = {sys.version.split()[0]}\n")
    pkg = venv / f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages/vllm"
    for d in (pkg, pkg / "utils", pkg / "entrypoints", pkg / "entrypoints/openai"):
        d.mkdir(parents=True, exist_ok=True)
        (d / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\n")
    (pkg / "entrypoints/openai/cli_args.py").write_text((SIM_DIR / "vllm_cli.py").read_text())
    (pkg / "utils/argparse_utils.py").write_text(
        "from vllm.entrypoints.openai.cli_args import FlexibleArgumentParser\n")
