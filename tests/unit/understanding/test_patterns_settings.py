"""The router on the patterns people write (issue 23): flags and environment variables named by what they
do, by their value or in other languages.

Sentences written for this test, not corpus lines; the config and the reading are in pattern_cases.py.
"""

from __future__ import annotations

import pytest

from bot.router import route
from bot.understanding.markup import read
from tests.unit.understanding.pattern_cases import ALIASES, CFG, expect, outcome


@pytest.mark.parametrize(("text", "service", "flag", "value"), [
    ("how much context does kimi support", "kimi", "max-model-len", None),
    ("is custom allreduce off on qwen", "qwen", "disable-custom-all-reduce", None),
    ("mem utilization kimi", "kimi", "gpu-memory-utilization", None),
    ("<@U0BOT> what precision is the kv cache of qwen in", "qwen", "kv-cache-dtype", None),
    ("how many gpus does kimi shard over", "kimi", "tensor-parallel-size", None),
    ("is kimi at 64k context", "kimi", "max-model-len", "65536"), ("qwen 32k?", "qwen", "max-model-len", "32768"),
    ("is qwen running with 90% mem util", "qwen", "gpu-memory-utilization", "0.9"),
    ("tp4 on kimi?", "kimi", "tensor-parallel-size", "4"), ("is qwen on fp16?", "qwen", "dtype", "float16"),
    ("is the kv cache fp8 on kimi", "kimi", "kv-cache-dtype", "fp8"),
])
def test_flags_by_what_they_do_and_values_as_the_flag_takes_them(text: str, service: str, flag: str,
                                                                 value: str | None) -> None:
    expect(text, "flag", [service], flag=flag, **({"value": value} if value else {}))


def test_memory_utilization_of_a_node_is_the_gpus() -> None:
    intent, _, _, args = outcome("memory utilization on gpu-b")
    assert intent == "gpus" and not args


@pytest.mark.parametrize(("text", "services", "env"), [
    ("is NCCL_P2P_DISABLE set in the env for kimi", ["kimi"], "NCCL_P2P_DISABLE"),
    ("is the hf token in qwen's environment", ["qwen"], "HF_TOKEN"),
    ("is hf_transfer enabled on kimi", ["kimi"], "HF_HUB_ENABLE_HF_TRANSFER"),
    ("is the engine ready timeout set for qwen", ["qwen"], "VLLM_ENGINE_READY_TIMEOUT_S"),
])
def test_environment_questions(text: str, services: list[str], env: str) -> None:
    expect(text, "flag", services, env=env)


@pytest.mark.parametrize(("text", "flag", "value"), [
    ("does kimi load from safetensors", "load-format", "safetensors"),
    ("does qwen quantize with awq", "quantization", "awq"),
])
def test_a_setting_named_by_its_value_takes_the_words_of_its_own_name(text: str, flag: str, value: str) -> None:
    expect(text, "flag", [text.split()[1]], flag=flag, value=value)


def test_tool_calling_switched_on_is_the_auto_tool_choice_flag() -> None:
    expect("is tool calling enabled on qwen", "flag", ["qwen"], flag="enable-auto-tool-choice")
    expect("which tool parser does qwen use", "flag", ["qwen"], flag="tool-call-parser")


@pytest.mark.parametrize(("text", "flag"), [
    ("¿qué puerto usa qwen?", "port"), ("kimi 用哪个端口", "port"), ("kimiのテンソル並列は？", "tensor-parallel-size"),
    ("qwen 的流水线并行", "pipeline-parallel-size"), ("welche quantisierung nutzt qwen", "quantization"),
    ("le parallélisme de tenseurs de qwen ?", "tensor-parallel-size"),
])
def test_flags_by_their_words_in_other_languages(text: str, flag: str) -> None:
    services = ["kimi"] if "kimi" in text else ["qwen"]
    expect(text, "flag", services, flag=flag)


@pytest.mark.parametrize(("text", "intent"), [
    ("what's the gpu util knob on kimi", "flag"), ("gpu util setting for qwen", "flag"),
    ("gpu util on kimi", "gpus"), ("gpu util on gpu-b", "gpus"),
])
def test_the_gpus_utilisation_with_a_word_of_setting_is_the_flag(text: str, intent: str) -> None:
    assert outcome(text)[0] == intent, text


def test_a_setting_named_only_in_a_pasted_log_line_is_not_the_question() -> None:
    text = "<@U0BOT> INFO 12-05 04:40:00 [api_server.py:1024] Starting vLLM API server on http://0.0.0.0:8000\nkimi up?"
    expect(text, "status", ["kimi"])


def test_something_different_in_a_services_env_is_what_changed() -> None:
    expect("anything different in kimi's env since monday", "changes", ["kimi"])
    expect("something different in qwen's flags?", "changes", ["qwen"])


def test_the_kv_cache_block_is_the_block_size_flag() -> None:
    expect("how big is qwen's kv cache block", "flag", ["qwen"], flag="block-size")


def test_the_journals_options_after_logs_are_no_vllm_flags() -> None:
    expect("logs qwen --since 2h", "logs", ["qwen"])
    expect("what's qwen's --max-num-seqs", "flag", ["qwen"], flag="max-num-seqs")


@pytest.mark.parametrize(("text", "intent"), [
    ("who changed qwen's max model len", "changes"), ("what's qwen's max model len", "flag"),
    ("how is qwen launched", "settings"), ("how was kimi started", "settings"),
])
def test_who_changed_a_flag_and_how_a_service_is_launched(text: str, intent: str) -> None:
    assert outcome(text)[0] == intent, text


def test_the_gpu_util_fraction_reserved_is_the_flag_and_an_eval_is_no_name() -> None:
    expect("what gpu util fraction does kimi reserve", "flag", ["kimi"], flag="gpu-memory-utilization")
    assert route(read("restart qwen, unless the eval's still running", "terminal"), CFG, ALIASES).unknown == []
