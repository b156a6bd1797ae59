"""The simulated vLLM's own command-line parser: a small table of ``vllm serve`` flags and their types.

Written from vLLM's engine-arguments documentation for the simulator alone — it imports nothing from
``services/`` (the product's table is ``services/change/vllm_flags.toml``; a test must not check the product
with the product). Standard library only: the simulated node also installs this file as
``vllm/entrypoints/openai/cli_args.py`` of a fake ``vllm`` package in its venv, so that the node-side parser
check (``services/node/change.py``) finds ``make_arg_parser`` and ``validate_parsed_serve_args`` where vLLM has
them. Flags the table does not know are let through (the simulated server starts with them); a bad value of a
known flag, or a removed flag, stops it as vLLM's argparse does: ``vllm serve: error: argument --max-num-seqs:
invalid int value: 'abc'``, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from typing import Any

_INT = ("port", "tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size", "max-num-seqs", "seed",
        "max-loras", "max-lora-rank", "api-server-count", "block-size", "max-log-len", "shutdown-timeout",
        "max-cudagraph-capture-size", "num-gpu-blocks-override", "max-parallel-loading-workers")
_FLOAT = ("gpu-memory-utilization", "cpu-offload-gb", "kv-offloading-size")
_HUMAN_INT = ("max-model-len", "max-num-batched-tokens", "kv-cache-memory-bytes")
_BOOL = ("enforce-eager", "trust-remote-code", "enable-prefix-caching", "enable-chunked-prefill",
         "enable-expert-parallel", "enable-auto-tool-choice", "async-scheduling", "enable-log-requests",
         "enable-log-outputs", "disable-custom-all-reduce", "enable-lora", "enable-sleep-mode",
         "language-model-only", "disable-uvicorn-access-log")
_STORE_TRUE = ("disable-log-stats", "headless")
_JSON = ("speculative-config", "compilation-config", "kv-transfer-config", "attention-config",
         "override-generation-config", "model-loader-extra-config", "hf-overrides", "limit-mm-per-prompt",
         "default-chat-template-kwargs")
_CHOICES = {
    "dtype": ["auto", "half", "float16", "bfloat16", "float", "float32"],
    "uvicorn-log-level": ["debug", "info", "warning", "error", "critical", "trace"],
    "scheduling-policy": ["fcfs", "priority"],
    "distributed-executor-backend": ["ray", "mp", "uni", "external_launcher"],
}
_MULTI = ("api-key", "served-model-name")
_SHORT = {"tensor-parallel-size": "-tp", "pipeline-parallel-size": "-pp", "data-parallel-size": "-dp",
          "speculative-config": "-sc", "compilation-config": "-cc", "attention-config": "-ac",
          "quantization": "-q", "api-server-count": "-asc"}
_REMOVED = ("--swap-space", "--disable-log-requests")


def _human_int(value: str) -> int:
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgG])", value.strip())
    if not m:
        return int(value)
    number, suffix = m.groups()
    if suffix.isupper():
        return int(number) * {"K": 2**10, "M": 2**20, "G": 2**30}[suffix]
    return int(float(number) * {"k": 10**3, "m": 10**6, "g": 10**9}[suffix])


def _json(value: str) -> Any:
    return json.loads(value)


_json.__name__ = "JSON"
_human_int.__name__ = "int"


class FlexibleArgumentParser(argparse.ArgumentParser):
    """vLLM's parser reads ``--max_num_seqs`` as ``--max-num-seqs`` (only before a ``.`` or ``=``). Prefixes are not
    expanded here: a flag outside the small table must never be taken for one in it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        fixed = []
        for a in list(args or []):
            if a.startswith("--"):
                name, eq, rest = a[2:].partition("=")
                base, dot, tail = name.partition(".")
                a = "--" + base.replace("_", "-") + dot + tail + eq + rest
            fixed.append(a)
        return super().parse_known_args(fixed, namespace)

    def parse_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> argparse.Namespace:
        known, extra = self.parse_known_args(args, namespace)
        gone = [a for a in extra if a.split("=", 1)[0] in _REMOVED]
        if gone:
            self.error("unrecognized arguments: " + " ".join(gone))
        return known


def make_arg_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the table's flags to ``parser`` (as vLLM's ``make_arg_parser`` does with all of its own)."""
    def add(name: str, **kw: Any) -> None:
        names = [f"--{name}"] + ([_SHORT[name]] if name in _SHORT else [])
        parser.add_argument(*names, **kw)

    parser.add_argument("model_tag", nargs="?")
    parser.add_argument("--model")
    for n in _INT:
        add(n, type=int)
    for n in _FLOAT:
        add(n, type=float)
    for n in _HUMAN_INT:
        add(n, type=_human_int)
    for n in _BOOL:
        add(n, action=argparse.BooleanOptionalAction)
    for n in _STORE_TRUE:
        add(n, action="store_true")
    for n in _JSON:
        add(n, type=_json)
    for n, choices in _CHOICES.items():
        add(n, choices=choices)
    for n in _MULTI:
        add(n, nargs="+")
    add("quantization")
    add("tool-call-parser")
    parser.add_argument("--optimization-level", "-O", type=int, choices=[0, 1, 2, 3])
    return parser


def validate_parsed_serve_args(args: argparse.Namespace) -> None:
    """vLLM's quick checks that raise before a model is loaded."""
    if getattr(args, "enable_auto_tool_choice", False) and not getattr(args, "tool_call_parser", None):
        raise TypeError("Error: --enable-auto-tool-choice requires --tool-call-parser")


def check(argv: list[str]) -> None:
    """Parse the words after ``vllm serve``; a bad value exits 2 with argparse's message on stderr."""
    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    args = parser.parse_args(argv)
    try:
        validate_parsed_serve_args(args)
    except TypeError as e:
        parser.exit(1, f"{e}\n")
