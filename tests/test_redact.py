"""Secrets never reach an output: names, values, URLs, JSON and free text."""

from __future__ import annotations

import logging

import pytest

from bot.logs import JsonFormatter
from services.redact import REDACTED, Redactor, Secret, is_secret_name, redact_json_or_text, redact_patterns


@pytest.mark.parametrize("name", ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "VLLM_API_KEY", "S3_SECRET_ACCESS_KEY",
                                  "S3_ACCESS_KEY_ID", "DB_PASSWORD", "api-key", "--api-key", "hf-token",
                                  "SLACK_BOT_TOKEN", "MY_CREDENTIALS"])
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["NCCL_BUFFSIZE", "CUDA_DEVICE_MAX_CONNECTIONS", "ssl-keyfile",
                                  "max-num-batched-tokens", "tokenizer", "HF_HOME", "VLLM_LOGGING_LEVEL",
                                  "kv-cache-dtype"])
def test_not_secret_names(name: str) -> None:
    assert not is_secret_name(name)


def test_patterns_in_free_text() -> None:
    text = ("args --api-key sk-abcdef123456 --otlp-traces-endpoint https://user:hunter22@otel:4317 "
            "HF_TOKEN=hf_abcdefghijklmnop {'api_key': 'sk-zzzzzzzz', 'port': 8000} Bearer abcdefgh12345 "
            "url=https://s3/bucket?X-Amz-Signature=deadbeef&x=1")
    out = redact_patterns(text)
    for secret in ("sk-abcdef123456", "hunter22", "hf_abcdefghijklmnop", "sk-zzzzzzzz", "abcdefgh12345", "deadbeef"):
        assert secret not in out
    assert "https://user:[redacted]@otel:4317" in out
    assert "'port': 8000" in out


def test_json_values_redacted_by_key() -> None:
    out = redact_json_or_text('{"kv_connector": "Lmcache", "extra": {"aws_secret_access_key": "AKIAXXXX", "n": 2}}')
    assert "AKIAXXXX" not in out and '"n": 2' in out and '"kv_connector": "Lmcache"' in out


def test_known_values_replaced_in_place() -> None:
    r = Redactor(["s3cr3t-value"])
    assert r.text("line with s3cr3t-value inside") == f"line with {REDACTED} inside"


def test_secret_type_never_prints() -> None:
    s = Secret("xoxb-123-456")
    assert str(s) == REDACTED and "xoxb" not in repr(s) and f"{s}" == REDACTED
    assert s.reveal() == "xoxb-123-456"


def test_log_formatter_redacts_everything(caplog: pytest.LogCaptureFixture) -> None:
    rec = logging.LogRecord("x", logging.INFO, "f", 1, "token xoxb-1234567890-abc used", None, None)
    rec.detail = "HF_TOKEN=hf_abcdefghijkl"
    line = JsonFormatter().format(rec)
    assert "xoxb-1234567890" not in line and "hf_abcdefghijkl" not in line
