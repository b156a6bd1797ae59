"""bot/understanding/names.py and settings_words.py: names with their variants and typos; flags and env
variables by their everyday words."""

from __future__ import annotations

import pytest

from bot.understanding import lexicon, settings_words, values
from bot.understanding.markup import read
from bot.understanding.names import NameIndex
from bot.understanding.text import words
from tests.unit.understanding.pattern_cases import ALIASES, CFG


@pytest.mark.parametrize(("word", "service", "how"), [
    ("kimi", "kimi", "exact"), ("vllm-qwen3.service", "qwen", "alias"), ("vllm-qwen3", "qwen", "alias"),
    ("kimi-k2.5", "kimi", "alias"), ("qwen3-32b", "qwen", "alias"), ("/shared/kimi-k2.5-int4", "kimi", "alias"),
    ("k2.5", "kimi", "variant"), ("k25", "kimi", "variant"), ("qwen3", "qwen", "variant"),
    ("kimmi", "kimi", "typo"), ("qwne", "qwen", "typo"),
])
def test_names(word: str, service: str, how: str) -> None:
    index = NameIndex.build(CFG, ALIASES)
    found = index.find(word)
    assert found is not None and {s.name for s in found.services} == {service} and found.how == how


@pytest.mark.parametrize("word", ["gpu-c", "qwen2", "qwen9", "kimi2", "qwer", "llama", "time"])
def test_other_names_are_not_typos(word: str) -> None:
    assert NameIndex.build(CFG, ALIASES).find(word) is None


@pytest.mark.parametrize(("text", "kind", "name", "value"), [
    ("kimi tp?", "flag", "tensor-parallel-size", None), ("-tp of qwen", "flag", "tensor-parallel-size", None),
    ("context length for kimi", "flag", "max-model-len", None), ("max_num_seqs on qwen", "flag", "max-num-seqs", None),
    ("tensor paralel size qwen", "flag", "tensor-parallel-size", None),
    ("gpu mem util on qwen3?", "flag", "gpu-memory-utilization", None),
    ("are we still on NCCL_PROTO=LL?", "env", "NCCL_PROTO", "LL"),
    ("which NCCL_ALGO is kimi on, still Ring?", "env", "NCCL_ALGO", "Ring"),
    ("hf token on qwen?", "env", "HF_TOKEN", None), ("is HF_TOKEN set", "env", "HF_TOKEN", None),
    ("nccl p2p level for kimi", "env", "NCCL_P2P_LEVEL", None), ("what log level is qwen at", "env",
                                                                   "VLLM_LOGGING_LEVEL", None),
])
def test_settings_words(text: str, kind: str, name: str, value: str | None) -> None:
    found = settings_words.find(words(read(text)))
    assert found is not None and (found.kind, found.name, found.value) == (kind, name, value)


@pytest.mark.parametrize("text", ["tail -n 40 qwen", "gpu util qwen", "show nccl and cuda env", "any NCCL errors"])
def test_no_setting(text: str) -> None:
    assert settings_words.find(words(read(text))) is None


@pytest.mark.parametrize(("text", "english"), [
    ("starte qwen neu", ["restart", "qwen"]), ("ne redémarre pas kimi", ["not", "restart", "not", "kimi"]),
    ("不要重启 kimi", ["don't", "restart", "kimi"]), ("kimiのログを見せて", ["kimi", "logs", "show"]),
    ("cuál es la longitud de contexto de kimi", ["which", "context", "length", "kimi"]),
])
def test_lexicons(text: str, english: list[str]) -> None:
    w = lexicon.translate(words(read(text)), lambda x: x in ("kimi", "qwen"))
    got = [t.norm for t in w.tokens if t.norm not in lexicon.stopwords()]
    assert got == english


@pytest.mark.parametrize(("name", "typed", "written"), [
    ("max-model-len", "128k", "131072"), ("gpu-memory-utilization", "92%", "0.92"),
    ("NCCL_BUFFSIZE", "16MiB", "16777216"),
    ("dtype", "bf16", "bfloat16"), ("optimization-level", "O2", "2"), ("NCCL_ALGO", "ring", "Ring"),
    ("cpu-offload-gb", "16GiB", "16"), ("port", "8000", "8000"),
])
def test_values_are_written_the_way_the_setting_takes_them(name: str, typed: str, written: str) -> None:
    assert values.normal(name, typed) == written


@pytest.mark.parametrize(("text", "kind", "name", "value"), [
    ("qwen on bf16?", "flag", "dtype", "bfloat16"), ("does kimi do 128k", "flag", "max-model-len", "131072"),
    ("tp8 on kimi", "flag", "tensor-parallel-size", "8"),
    ("is the nccl buffer 4MiB", "env", "NCCL_BUFFSIZE", "4194304"),
])
def test_a_value_names_its_setting(text: str, kind: str, name: str, value: str) -> None:
    found = settings_words.find(words(read(text)))
    assert found is not None and (found.kind, found.name, found.value) == (kind, name, value)


def test_no_setting_in_context_words() -> None:
    assert settings_words.find(words(read("for context, kimi was restarted"))) is None
    assert settings_words.find(words(read("we served 10k requests today"))) is None
