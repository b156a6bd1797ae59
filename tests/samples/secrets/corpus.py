"""A corpus of secret shapes, as data: each says where the secret appears and which values must never be shown.

Used by tests/test_redact_corpus.py (unit level) and reusable end to end (a real unit, env file or journal line
built from ``text`` per ``where``). ``text`` is the whole line/value as it appears; ``secrets`` are the literal
values that must not appear in any output; ``keep`` are substrings that must survive redaction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Where = Literal["env", "env_file", "flag", "json_flag", "journal", "error"]


@dataclass(frozen=True)
class SecretShape:
    """One shape: ``env``/``env_file`` entries are ``NAME=value``; ``flag``/``json_flag`` are argv fragments."""

    id: str
    where: Where
    text: str
    secrets: tuple[str, ...]
    keep: tuple[str, ...] = field(default=())
    name: str | None = None  # env var or flag name, for ``env``/``env_file``/``flag``/``json_flag``
    value: str | None = None  # the value as passed, for the same


def _env(id: str, name: str, value: str, *secrets: str, where: Where = "env",
         keep: tuple[str, ...] = ()) -> SecretShape:
    return SecretShape(id, where, f"{name}={value}", secrets or (value,), keep, name, value)


def _flag(id: str, name: str, value: str, *secrets: str, where: Where = "flag",
          keep: tuple[str, ...] = ()) -> SecretShape:
    return SecretShape(id, where, f"--{name} {value}", secrets or (value,), keep, name, value)


CORPUS: list[SecretShape] = [
    _env("env-hf-token", "HF_TOKEN", "hf_AbCdEfGhIjKlMnOpQrStUv"),
    _env("env-hub-token", "HUGGING_FACE_HUB_TOKEN", "hf_ZyXwVuTsRqPoNmLkJiHg"),
    _env("env-db-pass", "DB_PASS", "Tr0ub4dor&3"),
    _env("env-pw-suffix", "REDIS_PW", "redis-pw-77231"),
    _env("env-passwd", "MYSQL_PASSWD", "my5ql-Passwd!"),
    _env("env-credential", "GCP_CREDENTIALS_JSON", "gcp-cred-blob-9911"),
    _env("env-slack-webhook", "SLACK_WEBHOOK_URL", "https://hooks.slack.com/services/T000/B000/XXXXyyyyZZZZ"),
    _env("env-private", "SIGNER_PRIVATE", "priv-material-4410"),
    _env("env-dsn", "SENTRY_DSN", "https://abc123def@o1.ingest.sentry.io/42"),
    _env("env-hf-tokens", "HF_TOKENS", "hf_One1111111111,hf_Two2222222222", "hf_One1111111111", "hf_Two2222222222"),
    _env("env-api-tokens", "API_TOKENS", "tokA-55555,tokB-66666", "tokA-55555", "tokB-66666"),
    _env("env-keys", "SERVICE_KEYS", "svc-key-aaaa1,svc-key-bbbb2", "svc-key-aaaa1", "svc-key-bbbb2"),
    _env("env-db-url", "DATABASE_URL", "postgres://app:p@ss/w0rd@db.internal:5432/app", "p@ss/w0rd",
         keep=("db.internal:5432/app",)),
    _env("env-aws-secret", "AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    _env("env-aws-id", "AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE"),
    _env("env-vllm-api-key", "VLLM_API_KEY", "vllm-key-31337"),
    _env("envfile-openai", "OPENAI_API_KEY", "sk-proj-AbCdEf0123456789GhIjKl", where="env_file"),
    _env("envfile-anthropic", "ANTHROPIC_API_KEY", "sk-ant-api03-AbCdEfGhIjKlMnOp0123", where="env_file"),
    _env("envfile-quoted", "HF_TOKEN", "'a b c secret'", "a b c secret", where="env_file"),
    _env("envfile-github", "GITHUB_TOKEN", "ghp_AbCdEfGhIjKlMnOpQrStUvWxYz012345", where="env_file"),
    _flag("flag-api-key", "api-key", "sk-abc123 sk-def456", "sk-abc123", "sk-def456"),
    _flag("flag-hf-token", "hf-token", "hf_FlagTokenValue123"),
    _flag("json-kv-transfer", "kv-transfer-config",
          '{"kv_connector":"LMCacheConnectorV1","kv_connector_extra_config":{"api_key":{"v":"kvsecret-889"}}}',
          "kvsecret-889", where="json_flag", keep=("LMCacheConnectorV1",)),
    _flag("json-loader-number", "model-loader-extra-config", '{"token": 12345678901}', "12345678901",
          where="json_flag"),
    _flag("json-camel", "model-loader-extra-config", '{"apiKey": "camel-secret-77", "n": 2}', "camel-secret-77",
          where="json_flag", keep=('"n": 2',)),
    _flag("json-dashed", "kv-transfer-config", '{"hf-token": "dash-secret-88", "kv_role": "kv_both"}',
          "dash-secret-88", where="json_flag", keep=("kv_both",)),
    _flag("json-list", "kv-transfer-config", '{"kv_connector_extra_config": {"tokens": ["lst-aaaa1", "lst-bbbb2"]}}',
          "lst-aaaa1", "lst-bbbb2", where="json_flag"),
    SecretShape("journal-token-eq", "journal", "connecting with token=tok-journal-123 to backend",
                ("tok-journal-123",), ("to backend",)),
    SecretShape("journal-password-eq", "journal", "login ok password=pw-journal-456 user=admin",
                ("pw-journal-456",), ("user=admin",)),
    SecretShape("journal-secret-eq", "journal", "secret=sec-journal-789", ("sec-journal-789",)),
    SecretShape("journal-upper", "journal", "TOKEN=up-tok-1 KEY=up-key-2 SECRET=up-sec-3",
                ("up-tok-1", "up-key-2", "up-sec-3")),
    SecretShape("journal-x-api-key", "journal", "request headers x-api-key: xak-98765 host: a",
                ("xak-98765",), ("host: a",)),
    SecretShape("journal-aws-colon", "journal", "AWS_SECRET_ACCESS_KEY: wJalrColonSecret/abc",
                ("wJalrColonSecret/abc",)),
    SecretShape("journal-aws-spaces", "journal", "aws_secret_access_key = wJalrSpaceSecret+xyz",
                ("wJalrSpaceSecret+xyz",)),
    SecretShape("journal-asia", "journal", "using temporary key ASIAY34FZKBOKMUTVV7A for s3",
                ("ASIAY34FZKBOKMUTVV7A",), ("for s3",)),
    SecretShape("journal-github-pat", "journal", "clone with github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
                ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",)),
    SecretShape("journal-short-bearer", "journal", "Authorization: Bearer abc12", ("abc12",)),
    SecretShape("journal-basic", "journal", "sent Basic dXNlcjpwYXNz to proxy", ("dXNlcjpwYXNz",), ("to proxy",)),
    SecretShape("journal-multi-api-key", "journal", "args: --api-key sk-first1 sk-second2 --port 8000",
                ("sk-first1", "sk-second2"), ("--port 8000",)),
    SecretShape("journal-quoted-spaces", "journal", "HF_TOKEN='q1 q2 q3' started", ("q1 q2 q3",), ("started",)),
    SecretShape("journal-dq-spaces", "journal", 'PASSWORD="dq x y" next', ("dq x y",), ("next",)),
    SecretShape("journal-json-apikey", "journal", 'cfg {"apiKey": "jj-apikey-1", "port": 8000}', ("jj-apikey-1",),
                ('"port": 8000',)),
    SecretShape("journal-json-hf-token", "journal", 'cfg {"hf-token": "jj-hftok-2"}', ("jj-hftok-2",)),
    SecretShape("journal-url-at", "journal", "db postgres://u:a@b/c@db:5432/x up", ("a@b/c",), ("db:5432/x",)),
    SecretShape("journal-nvapi", "journal", "key nvapi-AbCdEfGhIjKlMnOpQrSt0123 used",
                ("nvapi-AbCdEfGhIjKlMnOpQrSt0123",)),
    SecretShape("journal-dapi", "journal", "databricks dapi0123456789abcdef0123456789abcdef ok",
                ("dapi0123456789abcdef0123456789abcdef",)),
    SecretShape("journal-google", "journal", "maps AIzaSyA-abcdefghijklmnopqrstuvwxyz01234 ok",
                ("AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",)),
    SecretShape("journal-ya29", "journal", "oauth ya29.a0AfH6SMBabcdefghijklmnop ok",
                ("ya29.a0AfH6SMBabcdefghijklmnop",)),
    SecretShape("journal-jwt", "journal",
                "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
                ("eyJzdWIiOiIxMjM0NTY3ODkwIn0", "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U")),
    SecretShape("journal-pem", "journal",
                "key -----BEGIN RSA PRIVATE KEY----- MIIEpAIBAAKCAQEAsecretbody== -----END RSA PRIVATE KEY----- loaded",
                ("MIIEpAIBAAKCAQEAsecretbody==",), ("loaded",)),
    SecretShape("journal-slack", "journal", "slack xoxb-1234567890-abcdefghij ok", ("xoxb-1234567890-abcdefghij",)),
    SecretShape("journal-glpat", "journal", "gitlab glpat-AbCdEfGhIjKlMnOpQrSt ok", ("glpat-AbCdEfGhIjKlMnOpQrSt",)),
    SecretShape("journal-namespace", "journal", "Namespace(api_key=['nsa-111', 'nsb-222'], port=8000)",
                ("nsa-111", "nsb-222"), ("port=8000",)),
    SecretShape("journal-non-default-args", "journal",
                "non-default args: {'model': '/models/x', 'api_key': ['nd-key-1'], "
                "'kv_transfer_config': KVTransferConfig(kv_connector='X', "
                "kv_connector_extra_config={'api_key': {'v': 'nd-nested-2'}}), 'port': 8000}",
                ("nd-key-1", "nd-nested-2"), ("'port': 8000", "/models/x")),
    SecretShape("error-url", "error", "ssh: connect to https://bob:hunter2@proxy:3128 failed", ("hunter2",),
                ("proxy:3128",)),
    SecretShape("error-token", "error", "HTTP 401 for HF_TOKEN=hf_ErrTokenValue999 (bad credentials)",
                ("hf_ErrTokenValue999",), ("(bad credentials)",)),
]

# Ordinary lines that must come back unchanged.
NOT_SECRET_LINES: list[str] = [
    "INFO 12-02 10:00:01 [loader.py:120] Loading weights took 12.3 seconds",
    "INFO 12-02 10:00:02 [metrics.py:455] Avg prompt throughput: 1234.5 tokens/s, "
    "Avg generation throughput: 88.1 tokens/s",
    "tokenizer=/models/x max_num_batched_tokens=8192 max_tokens=512",
    "--max-num-batched-tokens 8192 --kv-cache-dtype fp8 --enable-auto-tool-choice --ssl-keyfile /etc/ssl/key.pem",
    "Model /models/task-sk-model loaded",
    'compilation config {"cudagraph_mode":"FULL_AND_PIECEWISE","max_cudagraph_capture_size":256}',
    "KV cache usage: 12.5%, prefix cache hit rate: 40%",
    "https://example.com/docs/api",
]
