"""services/parse/vllm_flags.py: vLLM's flags as data — the groups an answer shows them in, a word read as
argparse reads it (negative numbers are values, unique prefixes expand, short aliases), and the warnings for
flags and variables a newer vLLM removed."""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest

from services.parse.vllm_args import parse_vllm_argv
from services.parse.vllm_flags import (
    FLAG_GROUPS,
    MODEL_FLAG_DEPRECATED,
    flag_group,
    group_flags,
    looks_like_flag,
    normalise_long,
    prefix_match,
    removed_env_warnings,
    removed_flag_warnings,
    resolve_short,
)


def test_group_flags_order_and_dotted() -> None:
    flags = parse_vllm_argv(
        ["vllm", "serve", "m", "--port", "8000", "--weird-flag", "1", "-sc.method", "eagle3", "--host", "::",
         "-tp", "8", "--gpu-memory-utilization", "0.9", "--enforce-eager", "--dtype", "bfloat16",
         "--data-parallel-rpc-port", "1300", "--kv-offloading-size", "10"]
    ).flags  # fmt: skip
    assert group_flags(flags) == [
        ("model", [("dtype", "bfloat16")]),
        ("parallelism", [("tensor-parallel-size", "8"), ("data-parallel-rpc-port", "1300")]),
        ("memory & capacity", [("gpu-memory-utilization", "0.9"), ("kv-offloading-size", "10")]),
        ("features/parsers", [("speculative-config.method", "eagle3")]),
        ("serving", [("port", "8000"), ("host", "::")]),
        ("compilation", [("enforce-eager", True)]),
        ("other", [("weird-flag", "1")]),
    ]
    assert group_flags({}) == []


def test_flag_group_matches_every_pattern_as_fnmatch_would() -> None:
    # flag_group matches plain names by equality and only the wildcards with fnmatch: the same groups.
    def by_fnmatch(name: str) -> str:
        base = name.split(".", 1)[0]
        return next((g for g, pats in FLAG_GROUPS if any(fnmatchcase(base, p) for p in pats)), "other")

    names = [p for _, pats in FLAG_GROUPS for p in pats]
    names += [p.replace("*", "x") for p in names if "*" in p] + [p.replace("*", "") for p in names if "*" in p]
    names += ["chat-template-content-format", "spec-decode", "ssl-keyfile", "data-parallel-size.x", "weird",
              "Host", "port.sub", "speculative-config.method", ""]
    for name in names:
        assert flag_group(name) == by_fnmatch(name), name


def test_removed_flag_warnings() -> None:
    flags = parse_vllm_argv(
        ["vllm", "serve", "m", "--swap-space", "16", "--disable-log-requests", "--enable-auto-tool-choice"]
    ).flags
    warnings = removed_flag_warnings(flags)
    assert len(warnings) == 3
    assert "--swap-space" in warnings[0] and "unrecognized arguments" in warnings[0]
    assert "--disable-log-requests" in warnings[1]
    assert "--tool-call-parser" in warnings[2] and "refuses to start" in warnings[2]
    assert removed_flag_warnings({"enable-auto-tool-choice": True, "tool-call-parser": "hermes"}) == []
    assert removed_flag_warnings({}, model_flag_with_serve=True) == [MODEL_FLAG_DEPRECATED]


def test_removed_env_warnings() -> None:
    warnings = removed_env_warnings(
        {"VLLM_USE_V1": "1", "VLLM_ATTENTION_BACKEND": "FLASHINFER", "HF_HOME": "/h"}
    )
    assert len(warnings) == 2
    assert "VLLM_USE_V1" in warnings[0] and "Unknown vLLM environment variable" in warnings[0]
    assert "VLLM_ATTENTION_BACKEND" in warnings[1] and "--attention-backend" in warnings[1]
    assert removed_env_warnings({"VLLM_LOGGING_LEVEL": "INFO"}) == []


@pytest.mark.parametrize(("token", "is_flag"), [
    ("--port", True), ("-tp", True), ("--", True), ('--json-arg={"a": 1}', True),
    ("-5", False), ("-0.5", False), ("-.5", False),  # argparse's negative numbers are values
    ("-", False),  # stdin, by convention
    ("8000", False), ("- not a flag", False),
])
def test_a_word_is_a_flag_as_argparse_reads_it(token: str, is_flag: bool) -> None:
    assert looks_like_flag(token) is is_flag


def test_short_aliases_prefixes_and_spellings() -> None:
    assert resolve_short("tp") == ("tensor-parallel-size", None)
    assert resolve_short("tp=8") == ("tensor-parallel-size", "8")
    assert resolve_short("O3") == ("optimization-level", "3") and resolve_short("O") == ("optimization-level", None)
    assert resolve_short("sc.method") == ("speculative-config.method", None)
    assert resolve_short("zz") == (None, None)
    assert prefix_match("tensor-parallel") == "tensor-parallel-size"  # a unique prefix, as argparse expands it
    assert prefix_match("enable") is None  # ambiguous
    assert prefix_match("port") is None  # already a whole name
    assert normalise_long("tensor_parallel_size") == "tensor-parallel-size"
    assert normalise_long("speculative-config.num_speculative_tokens") == "speculative-config.num_speculative_tokens"
