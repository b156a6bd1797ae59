"""services/node/cross_checks.py (and services/node/logged_command.py): the recorded Kimi server's command line
against its own start-up log line, /v1/models and the unit file, and a recorded vLLM log line with secrets."""

from __future__ import annotations

from services.models import HttpProbe, VllmCommand, Warnings
from services.node import cross_checks, parse_cache
from services.node.api_facts import ApiFacts, api_facts
from services.node.logged_command import log_command, nested_secrets
from services.node.probe import split_nul
from services.redact import REDACTED, Redactor
from tests.unit.services.node.recorded import KIMI_MAIN_PID, SAMPLES, unit

READY = unit("settings-ready")


def running() -> VllmCommand:
    assert READY.cmdline is not None and READY.cmdline.data is not None
    return parse_cache.command(READY, split_nul(READY.cmdline.data), Warnings())


def logged() -> VllmCommand:
    assert READY.vargs is not None
    args = parse_cache.logged_args(READY.vargs)
    assert args is not None
    return log_command(args)


def test_the_recorded_server_agrees_with_its_log_line() -> None:
    assert cross_checks.against_log(running(), logged(), KIMI_MAIN_PID) == []


def test_a_value_passed_otherwise_than_logged_is_said() -> None:
    cmd = running()
    cmd = cmd.model_copy(update={"flags": {**cmd.flags, "max-model-len": "64k", "gpu-memory-utilization": "0.9"}})
    (line,) = cross_checks.against_log(cmd, logged(), KIMI_MAIN_PID)
    assert line.startswith(f"vLLM's start-up log (`non-default args`) disagrees with the command line of PID "
                           f"{KIMI_MAIN_PID}: ")
    assert "--max-model-len 64k (command line) vs 131072 (log)" in line  # 64k = 64,000, the log says 131,072
    assert "--gpu-memory-utilization 0.9 (command line) vs 0.95 (log)" in line


def test_human_sizes_and_json_compare_by_value() -> None:
    assert cross_checks.comparable("128k") == 128_000.0 and cross_checks.comparable("128K") == 131_072.0
    assert cross_checks.comparable("131072") == 131_072.0
    assert cross_checks.comparable('{"a": 1, "b": [2]}') == cross_checks.comparable('{"b": [2],"a":1}')


def test_v1_models_against_the_command_line() -> None:
    assert cross_checks.against_api(running(), api_facts(READY)) == []  # /v1/models refused the recording (401)
    body = ('{"object": "list", "data": [{"id": "kimi-k2.5", "object": "model", "root": "/shared/kimi-k2.5-int4", '
            '"parent": null, "max_model_len": 65536}]}')
    api = api_facts(READY.model_copy(update={"models": HttpProbe(url="u", status=200, body=body)}))
    assert (api.root, api.ids, api.max_model_len) == ("/shared/kimi-k2.5-int4", ("kimi-k2.5",), 65536)
    assert cross_checks.against_api(running(), api) == [
        "/v1/models reports max_model_len 65536, but the settings say --max-model-len 131072: vLLM resolved "
        "another value than the one passed"]
    other = ApiFacts(answered=True, root="/models/other", ids=("other",))
    assert cross_checks.against_api(running(), other) == [
        "/v1/models says the server loaded /models/other, but the settings name /shared/kimi-k2.5-int4"]


def test_drift_from_the_unit_file_redacts_secrets() -> None:
    declared = parse_cache.command(READY, parse_cache.declared_argv(READY, parse_cache.unit_file(READY),
                                                                    parse_cache.show(READY, "+0000"), {}),
                                   Warnings())
    cmd = running()
    edited = cmd.model_copy(update={"flags": {**cmd.flags, "max-model-len": "65536", "api-key": "sk-new-123456789"}})
    diffs = cross_checks.drift(edited, declared, Redactor([]))
    assert "--max-model-len 65536 → 131072" in diffs
    assert f"--api-key differs ({REDACTED})" in diffs and not any("sk-new" in d for d in diffs)


def test_a_recorded_log_line_as_a_command_and_its_secrets() -> None:
    line = (SAMPLES / "logs" / "non_default_args_json_secrets.log").read_text().splitlines()[1]
    args = parse_cache.logged_args(line)
    assert args is not None
    cmd = log_command(args)
    assert cmd.model == "/models/x" and cmd.flags["max-model-len"] == "65536"
    assert cmd.flags["served-model-name"] == ["x-8b", "x"] and cmd.flags["enable-prefix-caching"] is False
    assert cmd.flags["speculative-config"] == '{"method": "ngram", "num_speculative_tokens": 3}'
    assert "model-tag" not in cmd.flags  # argparse's own bookkeeping, not a flag
    assert set(nested_secrets(args)) == {"sk-one-1234567890", "sk-two-0987654321", "lm-secret-value",
                                         "hf_abcdefghijklmnop1234"}
