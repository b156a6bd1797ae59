"""The flag table: it loads, every type checks what vLLM's own type functions accept, versions fall back."""

from __future__ import annotations

import pytest

from services.change import catalogue
from services.change.catalogue import Resolved, Unknown


def test_the_data_file_loads_and_names_its_version() -> None:
    tables = catalogue.load()
    assert "0.20" in tables
    t = tables["0.20"]
    assert t.flags["max-num-seqs"].type == "int" and t.flags["enforce-eager"].negatable
    assert t.aliases["tp"] == "tensor-parallel-size" and "swap-space" in t.removed
    assert "vllm/engine/arg_utils.py" in catalogue.DATA.read_text()  # the source is cited in the data


def test_versions() -> None:
    t, note = catalogue.table_for("0.20.1")
    assert t.key == "0.20" and note is None
    t, note = catalogue.table_for("0.31.0")
    assert t.key == "0.20" and note is not None and "0.31.0" in note
    _, note = catalogue.table_for(None)
    assert note is not None and "unknown" in note


@pytest.mark.parametrize(("flag", "value", "ok"), [
    ("max-num-seqs", "256", True), ("max-num-seqs", "2.5", False), ("max-num-seqs", "-1", True),
    ("gpu-memory-utilization", "0.9", True), ("gpu-memory-utilization", "ninety", False),
    ("max-model-len", "128k", True), ("max-model-len", "128K", True), ("max-model-len", "1.5K", False),
    ("max-model-len", "25.6k", True), ("max-model-len", "auto", True), ("max-model-len", "big", False),
    ("dtype", "bfloat16", True), ("dtype", "bf16", False),
    ("speculative-config", '{"method": "ngram"}', True), ("speculative-config", "[1]", False),
    ("speculative-config", "{'a': 1}", False), ("hf-overrides", "plain", True), ("hf-overrides", "{x", False),
    ("allowed-origins", '["*"]', True), ("allowed-origins", "*", False),
    ("optimization-level", "3", True), ("optimization-level", "4", False),
])
def test_values(flag: str, value: str, ok: bool) -> None:
    t, _ = catalogue.table_for("0.20.1")
    assert (catalogue.value_error(t.flags[flag], value) is None) is ok


def test_switches_take_no_value_and_lists_only_where_multi() -> None:
    t, _ = catalogue.table_for("0.20.1")
    assert catalogue.value_error(t.flags["enforce-eager"], "yes") is not None
    assert catalogue.value_error(t.flags["enforce-eager"], False) is None
    assert catalogue.value_error(t.flags["served-model-name"], ["a", "b"]) is None
    assert catalogue.value_error(t.flags["max-num-seqs"], ["1", "2"]) is not None
    assert catalogue.value_error(t.flags["cudagraph-capture-sizes"], ["1", "x"]) is not None


def test_resolve() -> None:
    t, _ = catalogue.table_for("0.20.1")
    neg = catalogue.resolve(t, "--no-enable-prefix-caching")
    assert isinstance(neg, Resolved) and neg.negated and neg.flag.name == "enable-prefix-caching"
    # --no- only where vLLM has it (a store_true flag has none).
    assert isinstance(catalogue.resolve(t, "--no-disable-log-stats"), Unknown)
    assert isinstance(catalogue.resolve(t, "-sc"), Resolved)
    unknown = catalogue.resolve(t, "--tensor-paralel-size")
    assert isinstance(unknown, Unknown) and unknown.suggestions == ("tensor-parallel-size",)
