"""vLLM's flags as its argument parser knows them, and how that parser reads one word of a command line.

The tables are data: short aliases, which flags take no value or several, which hold secrets, the groups
a person sees them in, and the flags and variables current vLLM no longer accepts (with what to do
instead). The functions answer questions about one name or one word; reading a whole command line is
``services/parse/vllm_args.py``. (``services/change/vllm_flags.toml`` is a different table: the type of
each flag's value per vLLM version, for checking a settings change before it is written.)
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from fnmatch import fnmatchcase

from services.models import FlagValue

SHORT_ALIASES: dict[str, str] = {
    "tp": "tensor-parallel-size",
    "pp": "pipeline-parallel-size",
    "dp": "data-parallel-size",
    "dcp": "decode-context-parallel-size",
    "pcp": "prefill-context-parallel-size",
    "dpn": "data-parallel-rank",
    "dpr": "data-parallel-start-rank",
    "dpl": "data-parallel-size-local",
    "dpa": "data-parallel-address",
    "dpp": "data-parallel-rpc-port",
    "dpb": "data-parallel-backend",
    "dph": "data-parallel-hybrid-lb",
    "dpe": "data-parallel-external-lb",
    "ep": "enable-expert-parallel",
    "n": "nnodes",
    "r": "node-rank",
    "q": "quantization",
    "sc": "speculative-config",
    "cc": "compilation-config",
    "ac": "attention-config",
    "asc": "api-server-count",
}

# Flags that take no value (store_true or BooleanOptionalAction): a following word is NOT their value,
# which matters for `vllm serve --enforce-eager /models/x` where the word is the model.
KNOWN_SWITCHES = frozenset({
    "trust-remote-code", "enable-prefix-caching", "enforce-eager", "enable-auto-tool-choice",
    "enable-expert-parallel", "disable-log-stats", "disable-log-requests", "headless",
    "enable-chunked-prefill", "async-scheduling", "enable-log-requests", "enable-log-outputs",
    "disable-custom-all-reduce", "enable-lora", "disable-uvicorn-access-log", "enable-server-load-tracking",
    "enable-force-include-usage", "language-model-only", "enable-eplb", "kv-cache-metrics",
    "cudagraph-metrics", "enable-mfu-metrics", "aggregate-engine-logging", "grpc",
    "data-parallel-hybrid-lb", "data-parallel-external-lb", "allow-deprecated-quantization",
    "enable-sleep-mode", "enable-prompt-tokens-details", "enable-request-id-headers",
    "disable-fastapi-docs", "enable-tokenizer-info-endpoint", "disable-frontend-multiprocessing",
    "fully-sharded-loras", "skip-tokenizer-init", "enable-prompt-embeds", "enable-dbo",
    "disable-sliding-window", "disable-cascade-attn", "enable-ssl-refresh", "return-tokens-as-token-ids",
    "enable-log-deltas", "fail-on-environ-validation", "allow-credentials", "calculate-kv-scales",
    "disable-chunked-mm-input", "disable-hybrid-kv-cache-manager", "disable-nccl-for-dp-synchronization",
    "enable-mm-embeds", "exclude-tools-when-tool-choice-none", "interleave-mm-strings", "kv-sharing-fast-prefill",
    "log-error-stack", "ray-workers-use-nsight", "skip-mm-profiling", "tokens-only", "trust-request-chat-template",
    "use-tqdm-on-load",
})  # fmt: skip

# nargs="+" flags: every following non-flag word belongs to them (--middleware is "append" in vLLM, read greedily
# here so that a credential-bearing URL after it is still redacted). services/change/vllm_flags.toml agrees
# (tests/unit/services/change/test_flag_tables_agree.py).
MULTI_VALUE_FLAGS = frozenset({
    "api-key", "served-model-name", "middleware", "lora-modules", "cudagraph-capture-sizes", "allowed-media-domains",
    "ignore-patterns", "logits-processors",
})  # fmt: skip
# nargs="?": bare means True ("use the cached login"), with a word means that string.
OPTIONAL_VALUE_FLAGS = frozenset({"hf-token"})
SECRET_FLAGS = ("api-key", "hf-token")  # a tuple: secret_values() returns them in this order

FLAG_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("model", (
        "tokenizer", "tokenizer-mode", "revision", "tokenizer-revision", "code-revision", "served-model-name",
        "trust-remote-code", "dtype", "max-model-len", "quantization", "quantization-config", "load-format",
        "download-dir", "hf-config-path", "hf-overrides", "generation-config", "override-generation-config",
        "seed", "language-model-only", "hf-token", "model-impl", "config-format", "skip-tokenizer-init",
        "allow-deprecated-quantization",
    )),
    ("parallelism", (
        "tensor-parallel-size", "pipeline-parallel-size", "data-parallel-*", "enable-expert-parallel",
        "distributed-executor-backend", "nnodes", "node-rank", "headless", "api-server-count",
        "disable-custom-all-reduce", "enable-eplb", "eplb-config", "all2all-backend",
        "*-context-parallel-size", "master-addr", "master-port",
    )),
    ("memory & capacity", (
        "gpu-memory-utilization", "max-num-seqs", "max-num-batched-tokens", "kv-cache-dtype", "block-size",
        "kv-cache-memory-bytes", "num-gpu-blocks-override", "enable-prefix-caching",
        "prefix-caching-hash-algo", "enable-chunked-prefill", "cpu-offload-gb", "kv-offloading-*",
        "swap-space",
    )),
    ("features/parsers", (
        "tool-call-parser", "reasoning-parser", "enable-auto-tool-choice", "chat-template*",
        "default-chat-template-kwargs", "enable-lora", "max-loras", "max-lora-rank", "lora-modules",
        "speculative-config", "spec-*", "tool-parser-plugin",
    )),
    ("serving", (
        "host", "port", "uds", "api-key", "ssl-*", "root-path", "uvicorn-log-level",
        "disable-uvicorn-access-log", "disable-access-log-for-endpoints", "disable-log-stats",
        "enable-log-requests", "enable-log-outputs", "disable-log-requests", "max-log-len",
        "shutdown-timeout",
        "enable-server-load-tracking", "enable-force-include-usage", "allowed-origins", "allowed-methods",
        "allowed-headers", "middleware", "otlp-traces-endpoint", "collect-detailed-traces",
    )),
    ("compilation", (
        "optimization-level", "compilation-config", "cudagraph-capture-sizes", "max-cudagraph-capture-size",
        "enforce-eager", "performance-mode", "attention-config", "attention-backend",
    )),
)  # fmt: skip
OTHER_GROUP = "other"

# Long names the parser knows; used for argparse-style prefix matching (`--max-model` → max-model-len).
KNOWN_NAMES = frozenset(
    {p for _, pats in FLAG_GROUPS for p in pats if "*" not in p}
    | KNOWN_SWITCHES
    | MULTI_VALUE_FLAGS
    | set(SHORT_ALIASES.values())
    | {"model", "config", "optimization-level"}
)

REMOVED_FLAGS: dict[str, str] = {
    "swap-space": (
        "`--swap-space` was removed from vLLM (#36216, March 2026): current vLLM stops with "
        '"unrecognized arguments". Delete it from the command line.'
    ),
    "disable-log-requests": (
        "`--disable-log-requests` was removed from vLLM (#35723, March 2026): current vLLM stops with "
        '"unrecognized arguments". Delete it: requests are only logged with `--enable-log-requests`.'
    ),
}
_ATTENTION_FIX = 'use `--attention-backend NAME` (or `-ac \'{"backend": "NAME"}\'`) instead'
REMOVED_ENV: dict[str, str] = {
    "VLLM_USE_V1": (
        "`VLLM_USE_V1` was removed in November 2025 (V1 is the only engine now): vLLM ignores it and logs "
        '"Unknown vLLM environment variable". Delete it.'
    ),
    "VLLM_ATTENTION_BACKEND": (
        f"`VLLM_ATTENTION_BACKEND` was removed in January 2026 and is ignored; {_ATTENTION_FIX}."
    ),
    "VLLM_FLASH_ATTN_VERSION": (
        f"`VLLM_FLASH_ATTN_VERSION` was removed in January 2026 and is ignored; {_ATTENTION_FIX}."
    ),
    "VLLM_USE_TRTLLM_ATTENTION": (
        f"`VLLM_USE_TRTLLM_ATTENTION` was removed in January 2026 and is ignored; {_ATTENTION_FIX}."
    ),
    "VLLM_DISABLE_FLASHINFER_PREFILL": (
        f"`VLLM_DISABLE_FLASHINFER_PREFILL` was removed in January 2026 and is ignored; {_ATTENTION_FIX}."
    ),
    "VLLM_USE_CUDNN_PREFILL": (
        f"`VLLM_USE_CUDNN_PREFILL` was removed in January 2026 and is ignored; {_ATTENTION_FIX}."
    ),
}
MODEL_FLAG_DEPRECATED = (
    "`--model` with `vllm serve` is deprecated and will be removed: put the model right after `vllm serve` "
    "(`vllm serve MODEL …`)."
)

# Flags that any web server may have: they alone do not make a `serve` subcommand vLLM's.
GENERIC_FLAGS = frozenset({
    "host", "port", "uds", "api-key", "root-path", "config", "seed", "middleware", "allowed-origins",
    "allowed-methods", "allowed-headers", "model", "revision", "dtype", "download-dir", "uvicorn-log-level",
    "headless", "nnodes", "node-rank", "quantization",
})  # fmt: skip

# argparse treats these as values, not options (its _negative_number_matcher).
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")


def looks_like_flag(tok: str) -> bool:
    """True when argparse reads ``tok`` as an option rather than a value."""
    # Mirrors argparse: "-" alone, negative numbers and words with spaces are values, except that
    # `--flag={"a": 1}` is still an option because the part before "=" names one.
    if not tok.startswith("-") or tok == "-" or _NEGATIVE_NUMBER.match(tok):
        return False
    return " " not in tok or "=" in tok.split(" ", 1)[0]


def normalise_long(name: str) -> str:
    """A long flag's name as vLLM keys it: underscores become dashes before the first "."."""
    # Dotted JSON keys (`--speculative-config.num_speculative_tokens`) keep their underscores.
    base, dot, rest = name.partition(".")
    return base.replace("_", "-") + dot + rest


def resolve_short(body: str) -> tuple[str | None, str | None]:
    """(long name, explicit value) for a single-dash option body (``tp=8``, ``sc.method``, ``O3``)."""
    if body == "O":
        return "optimization-level", None
    if body.startswith("O") and re.fullmatch(r"=?\d+", body[1:]):
        return "optimization-level", body[1:].lstrip("=")
    name_part, eq, value = body.partition("=")
    base, dot, rest = name_part.partition(".")
    alias = SHORT_ALIASES.get(base)
    if alias is None:
        return None, None
    return alias + dot + rest, (value if eq else None)


def prefix_match(name: str) -> str | None:
    """The one known long name that ``name`` abbreviates (argparse takes unique prefixes), or None."""
    base, dot, rest = name.partition(".")
    if base in KNOWN_NAMES:
        return None
    candidates = [k for k in KNOWN_NAMES if k.startswith(base)]
    if len(candidates) == 1:
        return candidates[0] + dot + rest
    return None


# FLAG_GROUPS split into the names matched as they are and the few patterns with a wildcard: fnmatchcase
# compiles a regular expression for every pattern it is given, plain names too, and a cold `inferbot ask`
# groups one service's flags.
_GROUP_MATCHERS: tuple[tuple[str, frozenset[str], tuple[str, ...]], ...] = tuple(
    (group, frozenset(p for p in patterns if not any(c in p for c in "*?[")),
     tuple(p for p in patterns if any(c in p for c in "*?[")))
    for group, patterns in FLAG_GROUPS
)


@functools.lru_cache(maxsize=1024)
def flag_group(name: str) -> str:
    """The display group of a flag; dotted names (``speculative-config.method``) go with their base flag."""
    base = name.split(".", 1)[0]
    for group, names, wildcards in _GROUP_MATCHERS:
        if base in names or any(fnmatchcase(base, p) for p in wildcards):
            return group
    return OTHER_GROUP


def group_flags(flags: Mapping[str, FlagValue]) -> list[tuple[str, list[tuple[str, FlagValue]]]]:
    """Flags grouped for display, groups in ``FLAG_GROUPS`` order then "other"; empty groups omitted."""
    buckets: dict[str, list[tuple[str, FlagValue]]] = {g: [] for g, _ in FLAG_GROUPS}
    buckets[OTHER_GROUP] = []
    for name, value in flags.items():
        buckets[flag_group(name)].append((name, value))
    return [(g, items) for g, items in buckets.items() if items]


def removed_flag_warnings(
    flags: Mapping[str, FlagValue], *, model_flag_with_serve: bool = False
) -> list[str]:
    """Friendly warnings for flags current vLLM rejects or that stop it from starting."""
    warnings = [msg for name, msg in REMOVED_FLAGS.items() if name in flags]
    if model_flag_with_serve:
        warnings.append(MODEL_FLAG_DEPRECATED)
    if flags.get("enable-auto-tool-choice") is True and not flags.get("tool-call-parser"):
        warnings.append(
            "`--enable-auto-tool-choice` needs `--tool-call-parser NAME` (e.g. hermes, kimi_k2): without it "
            "vLLM refuses to start."
        )
    return warnings


def removed_env_warnings(env: Mapping[str, str]) -> list[str]:
    """Friendly warnings for vLLM environment variables that were removed and are now ignored."""
    return [msg for name, msg in REMOVED_ENV.items() if name in env]
