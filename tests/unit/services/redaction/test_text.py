"""services/redaction/text.py: secrets in free text and journal lines — every shape of the corpus goes, ordinary
text comes back byte-identical, and what spans lines, hides its shape or is context is found too.

Each free-text case is (text, secrets that must not survive, text that must survive). The secrets are made up
but shaped like the real thing, so a pattern that only knows yesterday's shapes fails here.
"""

from __future__ import annotations

import pytest

from services.redact import Redactor
from services.redaction.names import REDACTED
from services.redaction.text import redact_lines, redact_patterns


def test_patterns_in_free_text() -> None:
    text = ("args --api-key sk-abcdef123456 --otlp-traces-endpoint https://user:hunter22@otel:4317 "
            "HF_TOKEN=hf_abcdefghijklmnop {'api_key': 'sk-zzzzzzzz', 'port': 8000} Bearer abcdefgh12345 "
            "url=https://s3/bucket?X-Amz-Signature=deadbeef&x=1")
    out = redact_patterns(text)
    for secret in ("sk-abcdef123456", "hunter22", "hf_abcdefghijklmnop", "sk-zzzzzzzz", "abcdefgh12345", "deadbeef"):
        assert secret not in out
    assert "https://user:[redacted]@otel:4317" in out
    assert "'port': 8000" in out


_PEM = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
        "VTLw7onLRnrq0/IzW7yWR7QkrmBL7jTKEn5u+qKhbwKfBstIs+bMY2Zkp18gnTxK\n-----END RSA PRIVATE KEY-----")


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


@pytest.mark.parametrize("line", [
    "\x1b[32mINFO\x1b[0m 12-02 10:00:01 [loader.py:120] Loading weights took 12.3 seconds",
    "GET /v1/models?next=%2Fhome%3Fq%3D1 HTTP/1.1\" 200 OK",
    "GPU KV cache usage: 3.1%, prefix cache hit rate: 41.2%",
    "model\u00a0name:\u00a0Kimi-K2.5\u200b",
])
def test_a_line_with_hidden_characters_and_no_secret_comes_back_unchanged(line: str) -> None:
    assert redact_patterns(line) == line
    assert redact_lines([line]) == [line]
