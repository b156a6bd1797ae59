"""Secrets never reach an output: the JSON log, a node's error reasons, a config error on the terminal.

How each shape is found is tested beside the code that finds it (tests/unit/services/redaction/,
tests/unit/services/test_redact.py)."""

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
from services.redact import REDACTED


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
