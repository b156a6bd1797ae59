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

# Issue 22: shapes that leaked (and context that was over-redacted) on a hostile trial. Values are made up, but
# random and of each provider's real length and alphabet, so gitleaks' exact-length and entropy checks hold.
PYPI = ("pypi-AgEIcHlwaS5vcmczz2Tj2J2ek7up7NJQmZpTUcw9U2kA7ozhSxYTVVFPLE6J3iURlpcZ0rN3iIP3BG9g7sxcd_oPM1h5B5Vp8zwK8f_"
        "foBLzD1v_Sdf_43Uej1R_H1LjKDZSG6_lxBl01AULQH00KD1JjXk")
SENDGRID = "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"
STRIPE_SK = ("sk_live_h3gm1ICBnISEaWC9j6YCQpEToJ6U5zEcA78v1GSjyAcm6eEhrE88Wy0G5bBFRXf0PhHpN3Yb6clmDLpHvZUhWHCO2P"
             "WBSzKgdii")
STRIPE_RK = ("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"
             "4v3UFKon")
REPLICATE = "r8_Trf3b9lrQfVZHGuP2Wa6eXBpXdivPpzYCL293"
GROQ = "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"
VAULT_HVS = ("hvs.CAESIE4TvfkEtZYxz8k3S55M_qslVs1ATrfjq8vvtB-7BealGS3HGhfkPSjfOkwRa7JH1n8nS2qIXHvh-qWFjPbeCeoU"
             "rKfY")
VAULT_HVB = ("hvb.AAAAAQFgiwz98w6i5Ob51oCTxaVcxC8CqYo4edFXklslBJ2GnS455z2Q9w7Zv_DnVg7aHdebwhsdsUrk5sHPxkMGXEYtVDBTmp"
             "iGN1z_9uqIIdRouPP1gqTkzVaKXCvWQAq8lodrsMtl7SwNmA9Mo_spUHVT")
NPM = "npm_vC5AZpluYRHQBOZWVYB6vLisTBPTtjzfw8nC"
TWILIO = "SK2c695dd1272d2b0ab9c231fbcf8bbbd8"
MAILGUN = "key-c45a264501752455b794823461191f67"

_J = "INFO 12-02 10:00:01 "  # a vLLM-style journal prefix (with its own "[file.py:line]" after it)

ISSUE22: list[SecretShape] = [
    _env("i22-env-url-token-user", "OTEL_EXPORTER_OTLP_ENDPOINT",
         "https://SP9lxwPtTjKHMT0EhunlBvkmr2uzH1Lvf14TUEfj@otel.example.net:4318/v1/traces",
         "SP9lxwPtTjKHMT0EhunlBvkmr2uzH1Lvf14TUEfj", keep=("@otel.example.net:4318/v1/traces",)),
    _flag("i22-flag-otlp-token-user", "otlp-traces-endpoint", "https://5qpHy26uSv5Pqdv1qXVT2HwAI0HLynlazYvc@collector:4317",
          "5qpHy26uSv5Pqdv1qXVT2HwAI0HLynlazYvc", keep=("@collector:4317",)),
    SecretShape("i22-journal-url-token-user", "journal",
                _J + "[tracing.py:51] exporting spans to https://cl2HTKQ3EHo3xYGoaryAtoKa5UMxTDx8@otel.example.net/v1",
                ("cl2HTKQ3EHo3xYGoaryAtoKa5UMxTDx8",), ("[tracing.py:51]", "@otel.example.net/v1")),
    SecretShape("i22-journal-ini-aws-after-key", "journal",
                _J + "[s3.py:41] credentials: aws_secret_access_key = yil6qs/gcPu8r0ozWp92cWEYVkyrZ8edyVcbUsJY",
                ("yil6qs/gcPu8r0ozWp92cWEYVkyrZ8edyVcbUsJY",), ("[s3.py:41]", "aws_secret_access_key = ")),
    SecretShape("i22-journal-curl-u", "journal",
                _J + "[hooks.py:12] running: curl -sS -u deploy:MlxbXQS3Mqe8d5zFcB https://artifacts.example.net/up",
                ("MlxbXQS3Mqe8d5zFcB",), ("[hooks.py:12] running: curl -sS -u ", "https://artifacts.example.net/up")),
    SecretShape("i22-journal-mysql-p-space", "journal",
                _J + "[backup.py:9] exec: mysql -h db.internal -u vllm -p 7ZvjHtL8Iqk5cI4d vllm_stats",
                ("7ZvjHtL8Iqk5cI4d",), ("[backup.py:9]", "-h db.internal -u vllm -p ")),
    SecretShape("i22-journal-mysql-p-attached", "journal",
                _J + "[backup.py:9] exec: mysqldump -uroot -p1umK6dH0YZx8CY --single-transaction app",
                ("1umK6dH0YZx8CY",), ("--single-transaction app",)),
    # held on main already (a secret-named --flag takes the next word); kept here as the issue lists it
    SecretShape("i22-journal-password-flag", "journal",
                _J + "[backup.py:10] exec: mysqldump --password Wq3vNz8LkP2dRt6Y --single-transaction app",
                ("Wq3vNz8LkP2dRt6Y",), ("--single-transaction app",)),
    SecretShape("i22-journal-sshpass-p", "journal",
                _J + "[sync.py:3] sshpass -p TKS0cShwcdqOdBz ssh ops@gpu-b uptime", ("TKS0cShwcdqOdBz",),
                ("ssh ops@gpu-b uptime",)),
    SecretShape("i22-journal-docker-login-p", "journal",
                _J + "[pull.py:20] docker login -u ci -p QJcpUP37yhWqbKEakj7x registry.example.net",
                ("QJcpUP37yhWqbKEakj7x",), ("registry.example.net",)),
    SecretShape("i22-journal-redis-cli-a", "journal",
                _J + "[cache.py:8] redis-cli -h cache -a 1Uc9kokoa21BpqlHJ8O3Vuh6 ping",
                ("1Uc9kokoa21BpqlHJ8O3Vuh6",), ("ping",)),
    SecretShape("i22-journal-header-tuples", "journal",
                _J + "[client.py:77] request headers: Headers([('host', 'api.example.net'), "
                "('x-api-key', '6M5j9E1rPEJ5PAZHszXj2UUGl6jEEx2O'), ('accept', '*/*')])",
                ("6M5j9E1rPEJ5PAZHszXj2UUGl6jEEx2O",), ("('host', 'api.example.net')", "('accept', '*/*')")),
    SecretShape("i22-journal-asgi-byte-headers", "journal",
                _J + "[app.py:30] scope headers: [(b'host', b'10.0.0.7:8000'), "
                "(b'x-api-key', b'TPWZBqHZtOPD0oB1ljkJqkYV3sJt')]",
                ("TPWZBqHZtOPD0oB1ljkJqkYV3sJt",), ("(b'host', b'10.0.0.7:8000')",)),
    SecretShape("i22-journal-cookie", "journal",
                "DEBUG 12-02 10:00:01 [http.py:90] > Cookie: session=EwZKpNPqEopj6m9tL2ZtKwPVlcwEyUDt; theme=dark",
                ("EwZKpNPqEopj6m9tL2ZtKwPVlcwEyUDt",), ("[http.py:90] > Cookie: ",)),
    SecretShape("i22-journal-set-cookie", "journal",
                "DEBUG 12-02 10:00:01 [http.py:91] < Set-Cookie: sid=YBBgbc4Id0TyfUmizNwocIn1ZT62FNNjfX0egscN; "
                "Path=/; HttpOnly", ("YBBgbc4Id0TyfUmizNwocIn1ZT62FNNjfX0egscN",), ("[http.py:91] < Set-Cookie: ",)),
    SecretShape("i22-journal-ansi-key", "journal",
                "\x1b[32mINFO\x1b[0m 12-02 10:00:01 [config.py:12] \x1b[1mapi_key\x1b[0m=Qulf2618OrrCRmdGnvRlBwGU",
                ("Qulf2618OrrCRmdGnvRlBwGU",), ("[config.py:12]",)),
    SecretShape("i22-journal-nbsp-key", "journal", _J + "[env.py:5] HF_TOKEN\u00a0= ooQ6MT5FlzroSaoA66B6V5zt",
                ("ooQ6MT5FlzroSaoA66B6V5zt",), ("[env.py:5]",)),
    SecretShape("i22-journal-zero-width-key", "journal", _J + "[env.py:6] api_key\u200b=ZVyRtGUO7heBEFOUkfBtIZp8",
                ("ZVyRtGUO7heBEFOUkfBtIZp8",), ("[env.py:6]",)),
    SecretShape("i22-journal-url-encoded-pair", "journal",
                _J + "[oauth.py:44] GET /callback?state=api_key%3DEh4Sq1HDizX4WTOe2Y42UXUegB9a&next=%2Fhome",
                ("Eh4Sq1HDizX4WTOe2Y42UXUegB9a",), ("[oauth.py:44] GET /callback?state=",)),
    SecretShape("i22-journal-url-encoded-json", "journal",
                _J + "[proxy.py:61] body=%7B%22token%22%3A%22JxAIi6htBK0lRekRM9UWzeEto0%22%7D",
                ("JxAIi6htBK0lRekRM9UWzeEto0",), ("[proxy.py:61] body=",)),
    SecretShape("i22-journal-pydantic-errors-repr", "journal",
                _J + "[settings.py:20] errors: [{'type': 'string_too_short', 'loc': ('api_key',), 'msg': "
                "'String should have at least 40 characters', 'input': '3Qnljri8wqjDqXcosdHHQXx2l5YNuZ', "
                "'ctx': {'min_length': 40}}]", ("3Qnljri8wqjDqXcosdHHQXx2l5YNuZ",), ("'ctx': {'min_length': 40}",)),
    SecretShape("i22-journal-pypi", "journal", _J + f"[upload.py:7] twine using {PYPI}", (PYPI,), ("twine using",)),
    SecretShape("i22-journal-sendgrid", "journal", _J + f"[mail.py:7] sendgrid client {SENDGRID} ready", (SENDGRID,),
                ("ready",)),
    SecretShape("i22-journal-stripe-sk", "journal", _J + f"[billing.py:7] stripe {STRIPE_SK}", (STRIPE_SK,)),
    SecretShape("i22-journal-stripe-rk", "journal", _J + f"[billing.py:8] restricted {STRIPE_RK}", (STRIPE_RK,)),
    SecretShape("i22-journal-replicate", "journal", _J + f"[remote.py:7] replicate {REPLICATE} ok", (REPLICATE,),
                ("ok",)),
    SecretShape("i22-journal-groq", "journal", _J + f"[remote.py:8] groq {GROQ} ok", (GROQ,), ("ok",)),
    SecretShape("i22-journal-vault-hvs", "journal", _J + f"[vault.py:7] login {VAULT_HVS} ok", (VAULT_HVS,), ("ok",)),
    SecretShape("i22-journal-vault-hvb", "journal", _J + f"[vault.py:8] batch {VAULT_HVB} ok", (VAULT_HVB,), ("ok",)),
    SecretShape("i22-journal-npm", "journal", _J + f"[build.py:7] npm {NPM} ok", (NPM,), ("ok",)),
    SecretShape("i22-journal-twilio", "journal", _J + f"[sms.py:7] twilio {TWILIO} ok", (TWILIO,), ("ok",)),
    SecretShape("i22-journal-mailgun", "journal", _J + f"[mail.py:9] mailgun {MAILGUN} ok", (MAILGUN,), ("ok",)),
    # Over-redaction: the file name and line number around a secret stay.
    SecretShape("i22-journal-auth-py-line", "journal", _J + "[auth.py:88] refreshing token=bWEola8gIKjwZGuWLxXi",
                ("bWEola8gIKjwZGuWLxXi",), ("[auth.py:88] refreshing token=",)),
    SecretShape("i22-journal-token-utils-line", "journal",
                _J + "[token_utils.py:120] using api_key=StvGWDReNIyMiosRKvsZ", ("StvGWDReNIyMiosRKvsZ",),
                ("[token_utils.py:120] using api_key=",)),
]
CORPUS += ISSUE22

# Issue 22: context that was over-redacted: a flag named in prose, a login name in a URL, a uid, other "-p".
NOT_SECRET_ISSUE22: list[str] = [
    "vllm serve: error: argument --api-key: expected at least one argument",
    "INFO 12-02 10:00:01 [auth.py:88] refreshing the credentials cache",
    "cloning ssh://git@github.com/org/models.git",
    "connecting to postgres://postgres@db.internal:5432/app",
    "docker run -u 1000:1000 -v /srv:/srv vllm/vllm-openai:v0.20.1",
    "mkdir -p /var/lib/vllm && ssh -p 2222 gpu-a",
]
NOT_SECRET_LINES += NOT_SECRET_ISSUE22

