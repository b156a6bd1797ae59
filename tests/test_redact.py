"""Secrets never reach an output: names, values, URLs, JSON and free text."""

from __future__ import annotations

import json
import logging
import re
import sys
from pathlib import Path

import pytest

from bot.logs import JsonFormatter
from config.models import Node
from services.models import NodeError
from services.node.ssh import NodeUnreachable, describe_error
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


def test_log_formatter_redacts_structured_extras() -> None:
    rec = logging.LogRecord("x", logging.INFO, "f", 1, "probe done", None, None)
    rec.detail = {"kv": {"api_key": {"v": "extra-nested-1"}}, "n": 3, "url": "https://u:extra-pw-2@h/x"}
    rec.token = 12345678901
    rec.items = ["HF_TOKEN=hf_extralistvalue3"]
    line = JsonFormatter().format(rec)
    out = json.loads(line)
    for s in ("extra-nested-1", "extra-pw-2", "12345678901", "hf_extralistvalue3"):
        assert s not in line
    assert out["detail"]["n"] == 3 and out["detail"]["kv"]["api_key"] == REDACTED


def test_log_formatter_redacts_exception_text() -> None:
    try:
        raise RuntimeError("connect failed password=exc-pw-4 {'api_key': 'exc-key-5'}")
    except RuntimeError:
        rec = logging.LogRecord("x", logging.ERROR, "f", 1, "boom", None, sys.exc_info())
    line = JsonFormatter().format(rec)
    assert "exc-pw-4" not in line and "exc-key-5" not in line and "RuntimeError" in line


def test_node_error_reasons_never_hold_secrets() -> None:
    node = Node(name="n1", host="127.0.0.1")
    err = describe_error(node, RuntimeError("auth failed for token=ne-tok-6 at https://a:ne-pw-7@h"), 5)
    assert "ne-tok-6" not in err.reason and "ne-pw-7" not in err.reason and "RuntimeError" in err.reason
    direct = NodeError(kind="protocol", reason="the node's shell did not run the probe: HF_TOKEN=hf_shellbanner8")
    assert "hf_shellbanner8" not in direct.reason
    assert "hf_shellbanner8" not in str(NodeUnreachable(direct))


def test_config_error_never_echoes_a_token(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from bot.cli import main

    example = (Path(__file__).parent.parent / "config" / "example.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(re.sub(r'(?m)^host = .*$', 'host = "xoxb-1234567890-cfgleakvalue9 x"', example))
    assert main(["ask", "--config", str(bad), "--json", "status"]) == 2
    out = capsys.readouterr()
    assert "cfgleakvalue9" not in out.out + out.err and "host" in out.err
