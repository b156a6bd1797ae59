"""Journal parsing: load phase/progress, stats lines, banner version, durations (recorded samples)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from services.parse.vllm_log import (
    RawValue,
    load_durations,
    parse_banner_version,
    parse_load_progress,
    parse_non_default_args,
    parse_stats_lines,
    split_lines,
)

LOGS = Path(__file__).parent / "samples" / "logs"


def sample(name: str) -> str:
    # Not read_text(): universal-newline mode would turn tqdm's `\r` into line breaks.
    return (LOGS / name).read_bytes().decode()


def upto(text: str, marker: str) -> str:
    """The journal as it stood right after the line containing ``marker`` was written."""
    end = text.index("\n", text.index(marker))
    return text[: end + 1]


STARTUP = sample("startup_tp8_119shards.log")


def test_samples_keep_their_carriage_returns() -> None:
    assert STARTUP.count("\r") == 10


# --- load progress over a full TP=8, 119-shard start ------------------------------------------------


def test_waiting_for_gpu_before_vllm_starts() -> None:
    p = parse_load_progress(upto(STARTUP, "Waiting for GPU memory to free"))
    assert p.phase == "waiting_for_gpu"
    assert p.done is None and p.fraction is None
    assert p.last_line == "Waiting for GPU memory to free on GPUs 0-7 (need 90000 MiB each)..."


def test_banner_and_config_lines_are_not_a_phase_yet() -> None:
    # After the ExecStartPre waiter, vLLM's banner/config lines don't move the phase.
    p = parse_load_progress(upto(STARTUP, "Initializing a V1 LLM engine"))
    assert p.phase == "waiting_for_gpu"
    assert p.last_line.startswith("Initializing a V1 LLM engine (v0.20.1) with config:")


def test_mid_load_progress_from_newest_tqdm_update() -> None:
    p = parse_load_progress(upto(STARTUP, "54/119"))
    assert p.phase == "loading_weights"
    assert (p.done, p.total) == (54, 119)
    assert p.fraction == pytest.approx(0.4538, abs=1e-4)
    assert p.weights_elapsed_s == 121.0
    assert p.weights_remaining_s == 145.0
    assert p.failed is None
    assert (
        p.last_line
        == "Loading safetensors checkpoint shards:  45% Completed | 54/119 [02:01<02:25,  2.24s/it]"
    )


def test_several_cr_updates_on_one_line_take_the_last() -> None:
    p = parse_load_progress(upto(STARTUP, "2/119"))
    assert (p.done, p.total, p.weights_elapsed_s, p.weights_remaining_s) == (2, 119, 4.0, 265.0)


def test_first_tqdm_line_has_unknown_remaining() -> None:
    p = parse_load_progress(upto(STARTUP, "0/119"))
    assert (p.done, p.total, p.fraction) == (0, 119, 0.0)
    assert p.weights_elapsed_s == 0.0
    assert p.weights_remaining_s is None


@pytest.mark.parametrize(
    ("marker", "phase"),
    [
        ("Starting to load model", "loading_weights"),
        ("Filesystem type for checkpoints", "loading_weights"),
        ("Loading weights took", "loading_weights"),
        ("Model loading took", "kv_cache"),
        ("Dynamo bytecode transform", "compiling"),
        ("Available KV cache memory", "kv_cache"),
        ("Capturing CUDA graphs (decode, FULL)", "compiling"),
        ("Graph capturing finished", "starting_api"),
        ("init engine (profile", "starting_api"),
        ("Starting vLLM server on", "starting_api"),
        ("Waiting for application startup", "starting_api"),
        ("Application startup complete", "ready"),
    ],
)
def test_phase_follows_the_last_marker(marker: str, phase: str) -> None:
    assert parse_load_progress(upto(STARTUP, marker)).phase == phase


def test_ready_keeps_final_weight_progress() -> None:
    p = parse_load_progress(STARTUP)
    assert p.phase == "ready"
    assert (p.done, p.total, p.fraction) == (119, 119, 1.0)
    assert p.weights_elapsed_s == 267.0  # 04:27
    assert p.last_line == "Application startup complete."
    assert p.failed is None


def test_cuda_graph_bar_is_not_weight_progress() -> None:
    p = parse_load_progress(upto(STARTUP, "Capturing CUDA graphs (mixed prefill-decode"))
    assert (p.done, p.total) == (119, 119)
    assert p.last_line.startswith("Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%")


def test_tqdm_hours_and_it_per_s() -> None:
    text = (
        "(Worker_TP0 pid=7) \rMulti-thread loading shards:  10% Completed | 16/163 "
        "[1:02:03<9:18:27, 232.70s/it]\n"
    )
    p = parse_load_progress(text)
    assert p.phase == "loading_weights"
    assert (p.done, p.total) == (16, 163)
    assert p.weights_elapsed_s == 3723.0
    assert p.weights_remaining_s == 33507.0
    fast = parse_load_progress(
        "\rLoading pt checkpoint shards:  50% Completed | 2/4 [00:01<00:01,  1.71it/s]\n"
    )
    assert (fast.done, fast.weights_elapsed_s, fast.weights_remaining_s) == (2, 1.0, 1.0)


def test_generic_waiting_for_gpu_memory_marker() -> None:
    p = parse_load_progress("Waiting for GPU memory (3 of 8 GPUs busy)\n")
    assert p.phase == "waiting_for_gpu"


def test_launcher_http_started_is_ready() -> None:
    text = (
        "(APIServer pid=1) INFO 08-30 10:00:00 [launcher.py:30] "
        "API server: waiting for HTTP server to start\n"
        "(APIServer pid=1) INFO 08-30 10:00:01 [launcher.py:31] API server: HTTP server started\n"
    )
    assert parse_load_progress(upto(text, "waiting for HTTP")).phase == "starting_api"
    assert parse_load_progress(text).phase == "ready"


# --- journal short prefix ---------------------------------------------------------------------------

JOURNAL = sample("journal_short_prefix.log")


def test_journal_prefix_stripped_and_phase_read() -> None:
    p = parse_load_progress(upto(JOURNAL, "Starting to load model"))
    assert p.phase == "loading_weights"
    assert p.last_line == "Starting to load model Qwen/Qwen3-0.6B..."
    p = parse_load_progress(upto(JOURNAL, "3.61it/s"))
    assert (p.done, p.total, p.weights_remaining_s) == (1, 1, 0.0)


def test_journal_waiting_for_gpu_from_exec_start_pre() -> None:
    p = parse_load_progress(upto(JOURNAL, "Started vllm-qwen.service"))
    assert p.phase == "waiting_for_gpu"
    assert p.last_line == "Started vllm-qwen.service - vLLM Qwen3."


def test_journal_old_starting_api_server_wording_and_ready() -> None:
    assert parse_load_progress(upto(JOURNAL, "Starting vLLM API server 0")).phase == "starting_api"
    assert parse_load_progress(JOURNAL).phase == "ready"


def test_split_lines_keeps_journal_timestamp_for_cr_pieces() -> None:
    lines = split_lines("Dec 02 13:26:21 node vllm[1]: (EngineCore pid=2) \rA: 1% Completed | 1/9\rB\n")
    assert [(ln.msg, ln.journal_ts) for ln in lines] == [
        ("A: 1% Completed | 1/9", "Dec 02 13:26:21"),
        ("B", "Dec 02 13:26:21"),
    ]


# --- failure ----------------------------------------------------------------------------------------


def test_oom_failure_names_the_root_cause() -> None:
    p = parse_load_progress(sample("failed_oom.log"))
    assert p.failed is not None
    assert p.failed.startswith("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.96 GiB.")
    assert len(p.failed) == 200
    assert p.phase == "loading_weights"
    assert (p.done, p.total) == (7, 30)
    assert p.last_line == "vllm-llama.service: Failed with result 'exit-code'."


def test_generic_failure_without_specific_cause() -> None:
    text = upto(sample("failed_oom.log"), "Failed core proc")
    text = "\n".join(line for line in text.splitlines() if "OutOfMemory" not in line)
    p = parse_load_progress(text)
    assert p.failed == (
        "RuntimeError: Engine core initialization failed. See root cause above. "
        "Failed core proc(s): {'EngineCore': 1}"
    )


@pytest.mark.parametrize(
    "line",
    [
        "TimeoutError: Timed out waiting for engine core processes to start. This is often caused by slow "
        "weight loading",
        "vllm: error: unrecognized arguments: --tensor-paralel-size 8",
        "vllm serve: error: argument --max-model-len: invalid int value: '32k?'",
        "vllm-x.service: Main process exited, code=exited, status=1/FAILURE",
        "ERROR 02-21 09:00:25 [core.py:1] ValueError: Failed to load model - not enough GPU memory "
        "on device 0",
    ],
)
def test_failure_markers(line: str) -> None:
    p = parse_load_progress(f"Dec 02 13:26:14 node vllm[9]: {line}\n")
    assert p.failed is not None
    assert p.failed == line.split("] ", 1)[-1]


def test_empty_text() -> None:
    p = parse_load_progress("")
    assert (p.phase, p.done, p.failed, p.last_line) == (None, None, None, "")


# --- stats lines -----------------------------------------------------------------------------------


def test_new_stats_line_with_optional_parts() -> None:
    s = parse_stats_lines(sample("stats_new_optional.log"), 2026, "+0100")
    assert s is not None
    assert (s.prompt_tps, s.generation_tps, s.running, s.waiting) == (0.0, 1055.3, 18, 43)
    assert s.kv_cache_usage == 0.959
    assert s.prefix_cache_hit_rate == 0.314  # not the External (77%) or MM (12%) rate
    assert s.at == datetime(2026, 5, 19, 10, 13, 11, tzinfo=timezone(timedelta(hours=1)))
    assert s.at == datetime(2026, 5, 19, 9, 13, 11, tzinfo=UTC)


def test_old_v0_stats_line_pending_is_waiting() -> None:
    s = parse_stats_lines(sample("stats_v0.log"), 2024)
    assert s is not None
    assert (s.prompt_tps, s.generation_tps, s.running, s.waiting) == (0.0, 298.2, 6, 5)
    assert s.kv_cache_usage == 0.88  # GPU, not the CPU figure (2.5%)
    assert s.prefix_cache_hit_rate is None
    assert s.at == datetime(2024, 7, 8, 20, 51, 12, tzinfo=UTC)


def test_cpu_build_wording() -> None:
    s = parse_stats_lines(sample("stats_cpu.log"), 2026, "-0500")
    assert s is not None
    assert (s.generation_tps, s.running, s.waiting, s.kv_cache_usage) == (9.8, 1, 0, 0.004)
    assert s.at == datetime(2026, 12, 2, 15, 31, 40, tzinfo=UTC)


def test_aggregated_engines_prefix() -> None:
    s = parse_stats_lines(sample("stats_aggregated.log"), 2026)
    assert s is not None
    assert (s.prompt_tps, s.generation_tps, s.running, s.waiting) == (15.5, 640.2, 24, 0)
    assert (s.kv_cache_usage, s.prefix_cache_hit_rate) == (0.12, 0.5)


def test_stats_time_from_journal_prefix_when_vllm_prefix_missing() -> None:
    s = parse_stats_lines(JOURNAL, 2026, "+0000")
    assert s is not None
    assert (s.generation_tps, s.running, s.waiting, s.kv_cache_usage) == (164.9, 3, 1, 0.047)
    assert s.at == datetime(2026, 12, 2, 13, 27, 11, tzinfo=UTC)


def test_stats_without_any_timestamp() -> None:
    text = "Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.1%, Prefix cache hit rate: 0.0%\n"  # noqa: E501
    s = parse_stats_lines(text, 2026)
    assert s is not None and s.at is None and s.generation_tps == 2.0


def test_idle_server_has_no_stats_line() -> None:
    assert parse_stats_lines(sample("idle_no_stats.log"), 2026) is None
    assert parse_stats_lines(STARTUP, 2026) is None


def test_unreadable_tz_offset_counts_as_utc() -> None:
    s = parse_stats_lines(sample("stats_cpu.log"), 2026, "CET")
    assert s is not None
    assert s.at == datetime(2026, 12, 2, 10, 31, 40, tzinfo=UTC)
    s = parse_stats_lines(sample("stats_cpu.log"), 2026, "+05:30")
    assert s is not None
    assert s.at == datetime(2026, 12, 2, 5, 1, 40, tzinfo=UTC)


# --- version and durations --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "version"),
    [
        (STARTUP, "0.20.1"),  # ASCII banner `version 0.20.1`
        ("(APIServer pid=1) INFO 02-21 13:26:20 [utils.py:1]  ▄▄ ▄█ █  version 0.23.0\n", "0.23.0"),
        (JOURNAL, "0.20.1"),  # `vLLM server version 0.20.1, serving model`
        (sample("stats_v0.log"), "0.5.1"),  # `vLLM API server version 0.5.1`, no bracket
        (
            "(APIServer pid=1) INFO 09-01 08:00:00 [api_server.py:1] vLLM API server version 0.10.2\n",
            "0.10.2",
        ),
        (
            "(EngineCore pid=2) INFO 02-21 13:26:25 [core.py:94] "
            "Initializing a V1 LLM engine (v0.20.1) with config: x\n",
            "0.20.1",
        ),
        (sample("idle_no_stats.log"), None),
    ],
)
def test_banner_version(text: str, version: str | None) -> None:
    assert parse_banner_version(text) == version


def test_load_durations_full_start() -> None:
    assert load_durations(STARTUP) == {
        "weights_s": 267.81,
        "model_loading_gib": 82.35,
        "model_loading_s": 270.412803,
        "torch_compile_s": 39.69,
        "graph_capture_s": 7.0,
        "graph_capture_gib": 0.95,
        "init_engine_s": 52.87,
        "compilation_s": 39.69,
    }


def test_load_durations_older_wordings() -> None:
    text = (
        "INFO 01-02 03:04:05 [gpu_model_runner.py:1] Model loading took 15.2731 GiB and 130.123456 seconds\n"
        "INFO 01-02 03:04:35 [core.py:1] "
        "init engine (profile, create kv cache, warmup model) took 25.99 seconds\n"
    )
    assert load_durations(text) == {
        "model_loading_gib": 15.2731,
        "model_loading_s": 130.123456,
        "init_engine_s": 25.99,
    }


# --- vLLM's own list of the arguments it got -----------------------------------------------------------


def test_non_default_args_from_the_journal() -> None:
    args = parse_non_default_args(sample("non_default_args_json_secrets.log"))
    assert args is not None
    assert args["model_tag"] == args["model"] == "/models/x"
    assert (args["port"], args["max_model_len"], args["gpu_memory_utilization"]) == (8123, 65536, 0.95)
    assert args["enable_prefix_caching"] is False and args["enable_auto_tool_choice"] is True
    assert args["served_model_name"] == ["x-8b", "x"]
    assert args["speculative_config"] == {"method": "ngram", "num_speculative_tokens": 3}
    # A config object's repr is no literal: kept as the text vLLM logged, the rest still parsed.
    raw = args["compilation_config"]
    assert isinstance(raw, RawValue) and raw.startswith("CompilationConfig(mode=3")
    assert args["hf_token"] == "hf_abcdefghijklmnop1234"  # in clear: the caller redacts (assemble does)


def test_non_default_args_recorded_startup_and_newest_wins() -> None:
    args = parse_non_default_args(STARTUP)
    assert args == {"model_tag": "/models/GLM-5-FP8", "port": 8000, "tensor_parallel_size": 8,
                    "served_model_name": ["glm-5"]}
    two = STARTUP + "\n(APIServer pid=9) INFO 02-21 14:00:00 [utils.py:262] non-default args: {'port': 9000}\n"
    assert parse_non_default_args(two) == {"port": 9000}
    assert parse_non_default_args("INFO 02-21 13:26:14 [x.py:1] nothing here") is None
