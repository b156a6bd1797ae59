"""services/redaction/structured.py: secrets in JSON, YAML and objects — byte-identical when clean, still valid
JSON or YAML with ``[redacted]`` when not, and every secret value collected at any depth."""

from __future__ import annotations

import json

import pytest
import yaml

from services.redaction.names import REDACTED
from services.redaction.structured import (
    collect_secret_values,
    redact_json_or_text,
    redact_obj,
    redact_value,
    redact_yaml_text,
)


def test_json_values_redacted_by_key() -> None:
    out = redact_json_or_text('{"kv_connector": "Lmcache", "extra": {"aws_secret_access_key": "AKIAXXXX", "n": 2}}')
    assert "AKIAXXXX" not in out and '"n": 2' in out and '"kv_connector": "Lmcache"' in out


CLEAN_JSON = [
    '{"cudagraph_mode":"FULL_AND_PIECEWISE","max_cudagraph_capture_size":256}',
    '{"level": 3,  "pass_config": {"enable_fusion": true}}',
    '{\n  "kv_connector": "LMCacheConnectorV1",\n  "kv_role": "kv_both"\n}',
    '{"max_tokens":512,"tokenizer":"/m","x":[1,2.50,null,false]}',
    '[{"a":1},{"b":"\\u00e9"}]',
]


@pytest.mark.parametrize("text", CLEAN_JSON)
def test_clean_json_byte_identical(text: str) -> None:
    assert redact_json_or_text(text) == text
    assert redact_value("compilation-config", text) == text


@pytest.mark.parametrize(("text", "secrets"), [
    ('{"kv_connector_extra_config":{"api_key":{"v":"nested-v1"}}}', ["nested-v1"]),
    ('{"token": 12345678901}', ["12345678901"]),
    ('{"token": true}', ["true"]),
    ('{"secrets": ["l-one", "l-two"], "keep": 1}', ["l-one", "l-two"]),
    ('{"a": [{"hf-token": "in-list-1"}], "b": {"c": {"apiKey": "deep-1"}}}', ["in-list-1", "deep-1"]),
    ('{"endpoint": "https://u:pw-in-url@h:1/x", "n": 2}', ["pw-in-url"]),
    ('{"note": "HF_TOKEN=hf_abcdefghijklmnop"}', ["hf_abcdefghijklmnop"]),
])
def test_json_redacted_stays_json(text: str, secrets: list[str]) -> None:
    out = redact_json_or_text(text)
    parsed = json.loads(out)
    for s in secrets:
        assert s not in out
    assert REDACTED in json.dumps(parsed)
    assert "'[redacted]'" not in out


def test_json_redaction_keeps_other_bytes() -> None:
    text = '{"kv_connector":"X",  "extra":{"api_key":{"v":"x1"},"n":2}}'
    assert redact_json_or_text(text) == '{"kv_connector":"X",  "extra":{"api_key":"[redacted]","n":2}}'


def test_redact_obj_any_value_type() -> None:
    obj = {"a": {"api_key": {"v": "x"}}, "token": 123456789, "flag": True, "l": [{"secret": ["a"]}], "n": 1}
    assert redact_obj(obj) == {"a": {"api_key": REDACTED}, "token": REDACTED, "flag": True,
                               "l": [{"secret": REDACTED}], "n": 1}


def test_yaml_text_redacted_and_still_yaml() -> None:
    text = ("model: /models/x\nhf_token: hf_yamlyamlyaml\nkv-transfer-config:\n  kv_connector: X\n"
            "  api_key:\n    - ya-one\n    - ya-two\n  port: 1\npassword: |\n  multi\n  line\nmax_tokens: 512\n")
    out = redact_yaml_text(text)
    for s in ("hf_yamlyamlyaml", "ya-one", "ya-two", "multi"):
        assert s not in out
    data = yaml.safe_load(out)
    assert data["hf_token"] == REDACTED and data["kv-transfer-config"]["api_key"] == REDACTED
    assert data["kv-transfer-config"]["port"] == 1 and data["max_tokens"] == 512 and data["model"] == "/models/x"


def test_yaml_text_clean_is_identical() -> None:
    text = "model: /m\ntensor-parallel-size: 8\nmax-num-batched-tokens: 8192\n# comment: token\n"
    assert redact_yaml_text(text) == text


def test_collect_secret_values_any_depth_and_type() -> None:
    obj = {"env": {"HF_TOKEN": "hf-literal-1", "HOME": "/root"},
           "flags": {"kv-transfer-config": '{"extra": {"api_key": {"v": "nested-lit"}}}',
                     "model-loader-extra-config": {"token": 12345678901}},
           "api_keys": ["list-lit-1", "list-lit-2"], "token": True, "secret": "1", "password": "yes"}
    got = set(collect_secret_values(obj))
    assert {"hf-literal-1", "nested-lit", "12345678901", "list-lit-1", "list-lit-2"} <= got
    assert not got & {"/root", "True", "true", "1", "yes"}


def test_yaml_explicit_keys_and_anchors() -> None:
    text = ("model: /models/x\n"
            "? api-key\n"
            ": 9QwErTy7UiOp3AsDfGh1JkLz\n"
            "x-common: &tok 4ZxCvBn8MqWeRt2YuIoP6aSd\n"
            "hf-token: *tok\n"
            "kv-transfer-config:\n"
            "  kv_connector: LMCacheConnectorV1\n"
            "  kv_connector_extra_config: {api_key: *tok}\n"
            "max-model-len: 4096\n")
    out = redact_yaml_text(text)
    assert "9QwErTy7UiOp3AsDfGh1JkLz" not in out and "4ZxCvBn8MqWeRt2YuIoP6aSd" not in out, out
    data = yaml.safe_load(out)
    assert data["api-key"] == REDACTED and data["hf-token"] == REDACTED and data["model"] == "/models/x"
    assert data["max-model-len"] == 4096 and data["kv-transfer-config"]["kv_connector"] == "LMCacheConnectorV1"
