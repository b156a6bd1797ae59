"""A corpus of secret shapes (free text, names, JSON, YAML, reprs): every secret goes, everything else stays.

Each free-text case is (text, secrets that must not survive, text that must survive). The secrets are made up
but shaped like the real thing, so a pattern that only knows yesterday's shapes fails here.
"""

from __future__ import annotations

import json

import pytest
import yaml

from services.redact import (
    REDACTED,
    Redactor,
    collect_secret_values,
    is_secret_name,
    normalise_name,
    redact_json_or_text,
    redact_lines,
    redact_obj,
    redact_patterns,
    redact_value,
    redact_yaml_text,
)

_PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
        "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA PRIVATE KEY-----")

# (free text, secrets that must vanish, text that must stay)
CORPUS: list[tuple[str, list[str], list[str]]] = [
    ("token=tk_live_99 used", ["tk_live_99"], ["used"]),
    ("password=hunter2 user=bob", ["hunter2"], ["user=bob"]),
    ("secret=s3kr1t!", ["s3kr1t!"], []),
    ("TOKEN=abc12345 KEY=kv-998877 SECRET=zz-top-77", ["abc12345", "kv-998877", "zz-top-77"], []),
    ("HF_TOKEN=hf_abcdefghijklmnopqrstu", ["hf_abcdefghijklmnopqrstu"], ["HF_TOKEN="]),
    ("HF_TOKEN='a b c' next", ["a b c"], ["next"]),
    ('PASSWORD="x y z" tail', ["x y z"], ["tail"]),
    ("DB_PASS=pa55word PGPASS=pgpa55 DB_PW=pw-9911", ["pa55word", "pgpa55", "pw-9911"], []),
    ("MYSQL_PASSWD=rootroot1", ["rootroot1"], []),
    ("GOOGLE_CREDENTIALS=cred-val-1 SENTRY_DSN=https://abc123@o1.ingest.sentry.io/5", ["cred-val-1", "abc123"], []),
    ("SLACK_WEBHOOK_URL=https://hooks.slack.com/services/T0001/B0001/XXXXXXXXXXXXXXXXXXXXXXXX",
     ["T0001/B0001", "XXXXXXXXXXXXXXXXXXXXXXXX"], []),
    ("posting to https://hooks.slack.com/services/T0002/B0002/YYYYYYYYYYYY now", ["YYYYYYYYYYYY"], ["now"]),
    ("HF_TOKENS=tok-aaaa1,tok-bbbb2 API_TOKENS=at-1111", ["tok-aaaa1", "tok-bbbb2", "at-1111"], []),
    ("SIGNING_KEYS=k-one-111 PRIVATE_PEM=pem-priv-1", ["k-one-111", "pem-priv-1"], []),
    ("x-api-key: xak-42424242 rest", ["xak-42424242"], ["rest"]),
    ("X-API-KEY=xak-43434343", ["xak-43434343"], []),
    ("Authorization: Bearer abc", ["abc"], []),
    ("curl -H 'Authorization: Bearer short1' http://h", ["short1"], ["http://h"]),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", ["dXNlcjpwYXNzd29yZA=="], []),
    ("got Bearer eyJabc.def.ghi back", ["eyJabc.def.ghi"], ["back"]),
    ("AWS_SECRET_ACCESS_KEY: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", ["wJalrXUtnFEMI/K7MDENG"], []),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzzzz", ["wJalrXUtnFEMI"], []),
    ("aws_session_token=FQoGZXIvYXdzEJr//////////wEaDM", ["FQoGZXIvYXdzEJr"], []),
    ("--api-key sk-abc sk-def --port 8000", ["sk-abc", "sk-def"], ["--port 8000"]),
    ("--api-key=sk-ghi", ["sk-ghi"], []),
    ("--hf-token hf_xyzxyzxyzxyzxyz --model /m", ["hf_xyzxyzxyzxyzxyz"], ["--model /m"]),
    ("key AKIAIOSFODNN7EXAMPLE in use", ["AKIAIOSFODNN7EXAMPLE"], ["in use"]),
    ("temporary ASIAY34FZKBOKMUTVV7A", ["ASIAY34FZKBOKMUTVV7A"], []),
    ("ghp_0123456789abcdefghijABCDEFGHIJ012345 gho_0123456789abcdefghij0123", ["ghp_0123456789", "gho_0123456789"], []),
    ("ghu_aaaaaaaaaaaaaaaaaaaa ghs_bbbbbbbbbbbbbbbbbbbb ghr_cccccccccccccccccccc",
     ["ghu_aaaa", "ghs_bbbb", "ghr_cccc"], []),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOP",
     ["github_pat_11ABCDEFG"], []),
    ("glpat-xxxxxxxxxxxxxxxxxxxx", ["glpat-xxxx"], []),
    ("slack xoxb-1234567890-0987654321-abcdefABCDEF xoxp-1-2-3-abcdefgh xapp-1-A0-123-abcdef",
     ["xoxb-1234567890", "xoxp-1-2-3", "xapp-1-A0"], ["slack"]),
    ("openai sk-proj-abcdefghijklmnopqrstuvwxyz0123 sk-abcdefghij0123456789",
     ["sk-proj-abcdefgh", "sk-abcdefghij"], ["openai"]),
    ("anthropic sk-ant-api03-abcdefghijklmnopqrstuvwxyz", ["sk-ant-api03"], []),
    ("nvidia nvapi-AbCdEfGhIjKlMnOpQrStUvWxYz012345", ["nvapi-AbCdEf"], []),
    ("databricks dapi0123456789abcdef0123456789abcdef-2", ["dapi0123456789abcdef"], []),
    ("google AIzaSyA-1234567890abcdefghijklmnopqrstu ya29.a0AfH6SMBx-abcdefghijklmnopq",
     ["AIzaSyA-1234567890", "ya29.a0AfH6SMBx"], []),
    ("jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c",
     ["eyJhbGciOiJIUzI1NiJ9", "SflKxwRJSMeKKF2QT4fw"], []),
    (_PEM, ["MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun", "VTLw7onLRnrq0"], []),
    ("key loaded: " + _PEM.replace("\n", "\\n") + " done", ["MIIEowIBAAKCAQEA", "VTLw7onLRnrq0"], ["done"]),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAAB\n",
     ["b3BlbnNzaC1rZXktdjEAAAAA"], []),
    ('{"apiKey": "abc def ghi", "n": 1}', ["abc def ghi"], ['"n": 1']),
    ('{"hf-token": "hft-1234"}', ["hft-1234"], []),
    ("config {'api_key': 'pyrepr-key-1', 'port': 8000}", ["pyrepr-key-1"], ["'port': 8000"]),
    ("Namespace(api_key=['nsa-one', 'nsb-two'], port=8000, model='/m')", ["nsa-one", "nsb-two"],
     ["port=8000", "model='/m'"]),
    ("non-default args: {'model': '/m', 'api_key': ['a1b2c3', 'd4e5f6'], 'kv_transfer_config': "
     "KVTransferConfig(kv_connector='LMCache', kv_connector_extra_config={'token': 12345678901})}",
     ["a1b2c3", "d4e5f6", "12345678901"], ["'model': '/m'", "kv_connector='LMCache'"]),
    ("postgres://admin:p@ss/w:rd@db.internal:5432/app", ["p@ss", "w:rd", "ss/w"], ["db.internal:5432/app"]),
    ("redis://:redispass99@cache:6379/0", ["redispass99"], ["cache:6379/0"]),
    ("https://user:hunter22@otel:4317", ["hunter22"], ["otel:4317", "user"]),
    ("https://s3/bucket?X-Amz-Signature=deadbeef01&x=1", ["deadbeef01"], ["x=1"]),
    ("https://api.example/v1?access_token=at-5555&page=2", ["at-5555"], ["page=2"]),
    ('journal: {\\"token\\": \\"escaped-tok-1\\"}', ["escaped-tok-1"], []),
    ("hf_token: yaml-style-tok-1", ["yaml-style-tok-1"], []),
    ('"client_secret": "cs-0001-xyz"', ["cs-0001-xyz"], []),
    ("'refresh_token': 'rt-0001-xyz'", ["rt-0001-xyz"], []),
    ("OPENAI_API_KEY=sk-short", ["sk-short"], []),
    ("webhook_url=https://example.org/hook/abc", ["example.org/hook/abc"], []),
    ('Environment="API_KEYS=ak-one-1 ak-two-2" "PORT=8000"', ["ak-one-1", "ak-two-2"], ['"PORT=8000"']),
    ("export 'HF_TOKEN=quoted item value'", ["quoted item value"], ["export"]),
    ("using key ASIACORPUSAWS0606XY", ["ASIACORPUSAWS0606XY"], ["using key"]),
]


@pytest.mark.parametrize(("text", "secrets", "kept"), CORPUS, ids=[f"shape{i}" for i in range(len(CORPUS))])
def test_corpus_shape_redacted(text: str, secrets: list[str], kept: list[str]) -> None:
    out = redact_patterns(text)
    for s in secrets:
        assert s not in out, f"{s!r} leaked: {out!r}"
    for k in kept:
        assert k in out, f"{k!r} lost: {out!r}"
    assert REDACTED in out
    assert redact_patterns(out) == out  # redacting twice changes nothing (values go through several layers)


def test_corpus_is_big_enough() -> None:
    assert len(CORPUS) >= 40


# Realistic lines that must come through byte-identical.
PLAIN = [
    "INFO 12-02 10:00:01 [model_runner.py:1234] Loading weights took 12.34 GB and 40.1 seconds",
    "INFO 12-02 10:00:02 [loggers.py:116] Engine 000: Avg prompt throughput: 512.3 tokens/s, "
    "Avg generation throughput: 88.1 tokens/s, Running: 4 reqs, Waiting: 0 reqs, GPU KV cache usage: 3.1%",
    "INFO 12-02 10:00:03 [config.py:2200] Chunked prefill is enabled with max_num_batched_tokens=8192.",
    "Initializing a V1 LLM engine (v0.11.0) with config: model='/models/Llama-3.1-70B', "
    "tokenizer='/models/Llama-3.1-70B', skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, "
    "trust_remote_code=False, dtype=torch.bfloat16, max_seq_len=32768, tensor_parallel_size=8, "
    "kv_cache_dtype=auto, enable_prefix_caching=True",
    "Maximum concurrency for 32768 tokens per request: 12.50x",
    "NCCL_IB_HCA=mlx5 NCCL_SOCKET_IFNAME=eth0 NCCL_DEBUG=INFO CUDA_VISIBLE_DEVICES=0,1,2,3",
    "tokenizer=/models/x max_num_batched_tokens=8192 max_tokens=512 num_speculative_tokens=4",
    "--ssl-keyfile /etc/ssl/key.pem --kv-cache-dtype fp8 --enable-auto-tool-choice --max-num-batched-tokens 8192",
    "KEY_DIR=/etc/keys HF_TOKEN_PATH=/root/.cache/huggingface/token",
    "Route: /v1/chat/completions, Methods: POST",
    "https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json",
    "{'max_num_batched_tokens': 8192, 'tokenizer': '/m', 'pass_config': {'enable_fusion': True}}",
    "Received signal SIGTERM, shutting down; health check passed: ok",
    "EngineArgs(hf_overrides={}, hf_config_path=None, hf_token=None, api_key=None) using hf_transfer",
    "Generated tokens: 128, keys: 4",
    "uvicorn access: 10.0.0.7:51234 - \"GET /v1/models HTTP/1.1\" 200 OK",
]


@pytest.mark.parametrize("line", PLAIN)
def test_ordinary_text_untouched(line: str) -> None:
    assert redact_patterns(line) == line


@pytest.mark.parametrize("name", [
    "HF_TOKEN", "DB_PASS", "PGPASS", "MYSQL_PASSWD", "DB_PW", "ADMIN_PWD", "GOOGLE_APPLICATION_CREDENTIALS",
    "SLACK_WEBHOOK_URL", "PRIVATE_KEY", "SENTRY_DSN", "HF_TOKENS", "API_TOKENS", "SIGNING_KEYS", "AWS_ACCESS_KEYS",
    "apiKey", "hfToken", "hf-token", "x-api-key", "X-Api-Key", "clientSecret", "--api-key", "refreshToken",
    "aws_secret_access_key", "X-Amz-Signature", "sig", "authorization",
])
def test_secret_names_any_spelling(name: str) -> None:
    assert is_secret_name(name)


@pytest.mark.parametrize("name", [
    "max_tokens", "max_num_batched_tokens", "--max-num-batched-tokens", "maxTokens", "MAX_TOKENS", "tokenizer",
    "tokenizer-mode", "skip_tokenizer_init", "kv-cache-dtype", "KV_CACHE_MEMORY", "ssl-keyfile", "ssl_keyfile",
    "ssh_key_file", "SSH_KEY_PATH", "enable-auto-tool-choice", "KEY_DIR", "num_speculative_tokens",
    "num_lookahead_tokens", "return-tokens-as-token-ids", "enable-prompt-tokens-details",
    "long-prefill-token-threshold", "pass_config", "bos_token_id", "max_new_tokens", "NCCL_IB_HCA", "HF_HOME",
])
def test_not_secret_names(name: str) -> None:
    assert not is_secret_name(name)


def test_names_normalise_to_one_spelling() -> None:
    assert normalise_name("apiKey") == normalise_name("api-key") == normalise_name("--api-key") == "API_KEY"
    assert normalise_name("X-Api-Key") == "X_API_KEY"


# --- JSON: byte-identical when clean, valid JSON with "[redacted]" when not ---------------------------------

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


# --- YAML --------------------------------------------------------------------------------------------------

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


# --- known values ------------------------------------------------------------------------------------------

def test_collect_secret_values_any_depth_and_type() -> None:
    obj = {"env": {"HF_TOKEN": "hf-literal-1", "HOME": "/root"},
           "flags": {"kv-transfer-config": '{"extra": {"api_key": {"v": "nested-lit"}}}',
                     "model-loader-extra-config": {"token": 12345678901}},
           "api_keys": ["list-lit-1", "list-lit-2"], "token": True, "secret": "1", "password": "yes"}
    got = set(collect_secret_values(obj))
    assert {"hf-literal-1", "nested-lit", "12345678901", "list-lit-1", "list-lit-2"} <= got
    assert not got & {"/root", "True", "true", "1", "yes"}


def test_known_values_redacted_wherever_they_appear() -> None:
    r = Redactor()
    r.add_from({"kv": {"api_key": {"v": "plain-looking-value"}}, "token": 12345678901})
    line = "connecting with plain-looking-value to id 12345678901 on port 8000"
    assert r.text(line) == f"connecting with {REDACTED} to id {REDACTED} on port 8000"
    assert r.known_count == 2


def test_known_values_inside_json_keep_it_valid() -> None:
    r = Redactor(["12345678901", "known-str-9"])
    text = '{"id":12345678901,"note":"uses known-str-9 here","n":7}'
    out = r.text(text)
    assert json.loads(out) == {"id": REDACTED, "note": f"uses {REDACTED} here", "n": 7}
    clean = '{"cudagraph_mode":"FULL_AND_PIECEWISE","max_cudagraph_capture_size":256}'
    assert r.text(clean) == clean
    assert r.text(redact_value("kv-transfer-config", '{"extra":{"api_key":{"v":"x"}},"id":12345678901}')) == \
        '{"extra":{"api_key":"[redacted]"},"id":"[redacted]"}'


def test_pem_over_several_journal_lines() -> None:
    body = _PEM.split("\n")
    lines = ["vLLM starting", *body, "after with token=pem-after-1", "Loading weights took 3.2 seconds"]
    out = redact_lines(lines)
    assert len(out) == len(lines) and out[0] == "vLLM starting" and out[-1] == lines[-1]
    joined = "\n".join(out)
    assert "MIIEowIBAAKCAQEA" not in joined and "VTLw7onLRnrq0" not in joined and "pem-after-1" not in joined
    r = Redactor(["known-in-line-2"])
    assert r.lines(["x known-in-line-2 y", *body]) == [f"x {REDACTED} y"] + [REDACTED] * len(body)


def test_redact_lines_equals_per_line_on_ordinary_text() -> None:
    lines = [*PLAIN, *(c[0] for c in CORPUS if "\n" not in c[0])]
    assert redact_lines(lines) == [redact_patterns(x) for x in lines]


# --- issue 22: what spans lines, hides its shape, or is context ----------------------------------------------

def test_json_key_and_value_on_two_journal_lines() -> None:
    lines = ['DEBUG 12-02 10:00:01 [cfg.py:30] request body: {"api_key":',
             '  "1Ut9smiSZTnIgmoEnXNx9xWMpmq1dk4T", "port": 8000}',
             "INFO 12-02 10:00:02 [cfg.py:31] aws_secret_access_key =",
             "vVkS8Imngn5AJRzn9Edn8NFi",
             "INFO 12-02 10:00:03 [cfg.py:32] Loading weights took 3.2 seconds"]
    for out in (redact_lines(lines), Redactor().lines(lines), redact_patterns("\n".join(lines)).split("\n")):
        joined = "\n".join(out)
        assert "1Ut9smiSZTnIgmoEnXNx9xWMpmq1dk4T" not in joined and "vVkS8Imngn5AJRzn9Edn8NFi" not in joined, out
        assert len(out) == len(lines) and out[0] == lines[0] and out[-1] == lines[-1]
        assert '"port": 8000}' in out[1] and "[cfg.py:31] aws_secret_access_key =" in out[2]


def test_lines_as_journalctl_prints_them_keep_their_prefix() -> None:
    pre = "2026-12-05T00:03:03+0000 gpu-r sh[8209]: "
    lines = [pre + '{"api_key":', pre + '  "1Ut9smiSZTnIgmoEnXNx9xWMpmq1dk4T"}', pre + "api_key",
             pre + "  Value error [type=value_error, input_value='TWLHVgh2a9Lqi28vWqQiMp5qI4zDiM', input_type=str]"]
    out = redact_lines(lines)
    assert out == [lines[0], pre + f'  "{REDACTED}"}}', lines[2],
                   pre + f"  Value error [type=value_error, input_value='{REDACTED}', input_type=str]"]


def test_a_list_value_that_runs_over_lines_goes_whole() -> None:
    lines = ["cfg 'api_keys':", "  ['KbLm5ZXr2b8Rrn1DyHdqE0m4',", "   'Fv0wQpG3zxk6Lr4TnSa7Ym2e']", "next line stays"]
    out = redact_lines(lines)
    assert "KbLm5ZXr2b8Rrn1DyHdqE0m4" not in "".join(out) and "Fv0wQpG3zxk6Lr4TnSa7Ym2e" not in "".join(out)
    assert out[-1] == "next line stays"


PYDANTIC_ERROR = [
    "pydantic_core._pydantic_core.ValidationError: 2 validation errors for ServerSettings",
    "api_key",
    "  String should have at least 40 characters [type=string_too_short, "
    "input_value='TWLHVgh2a9Lqi28vWqQiMp5qI4zDiM', input_type=str]",
    "    For further information visit https://errors.pydantic.dev/2.11/v/string_too_short",
    "max_model_len",
    "  Input should be a valid integer [type=int_parsing, input_value='32k-tokens', input_type=str]",
]


def test_pydantic_input_value_of_a_secret_field() -> None:
    """pydantic names the field on the line above its errors; the secret field's input goes, another's stays."""
    for out in (redact_lines(PYDANTIC_ERROR), redact_patterns("\n".join(PYDANTIC_ERROR)).split("\n")):
        joined = "\n".join(out)
        assert "TWLHVgh2a9Lqi28vWqQiMp5qI4zDiM" not in joined, out
        assert "input_value='32k-tokens'" in joined and "string_too_short" in joined


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


def test_a_known_value_that_is_a_key_name_takes_the_value_after_it() -> None:
    """A secret-named setting whose value is a key's name ("credential_source": "aws_secret_access_key") made the
    key itself "[redacted]", and the value after it was shown."""
    r = Redactor()
    r.add_from({"credential_source": "aws_secret_access_key"})
    line = "INFO 12-02 10:00:01 [s3.py:41] aws_secret_access_key = ywJDgcb6qcF0xrKJzUfTjIAJV77i"
    for out in (r.text(line), r.lines([line])[0]):
        assert "ywJDgcb6qcF0xrKJzUfTjIAJV77i" not in out and "[s3.py:41]" in out, out


def test_a_short_known_value_never_cuts_into_a_file_name_or_a_word() -> None:
    r = Redactor(["vllm", "tok1"])
    out = r.text("[vllm_config.py:12] loading pytok1 as vllm with tok1")
    assert out == f"[vllm_config.py:12] loading pytok1 as {REDACTED} with {REDACTED}"


@pytest.mark.parametrize("line", [
    "\x1b[32mINFO\x1b[0m 12-02 10:00:01 [loader.py:120] Loading weights took 12.3 seconds",
    "GET /v1/models?next=%2Fhome%3Fq%3D1 HTTP/1.1\" 200 OK",
    "GPU KV cache usage: 3.1%, prefix cache hit rate: 41.2%",
    "model\u00a0name:\u00a0Kimi-K2.5\u200b",
])
def test_a_line_with_hidden_characters_and_no_secret_comes_back_unchanged(line: str) -> None:
    assert redact_patterns(line) == line
    assert redact_lines([line]) == [line]
