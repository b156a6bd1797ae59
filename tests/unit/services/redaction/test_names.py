"""services/redaction/names.py: which names are secret — env vars, flags, JSON/YAML/dict keys, in any spelling
(``HF_TOKEN``, ``hf-token``, ``hfToken``) — and a secret that never prints."""

from __future__ import annotations

import pytest

from services.redaction.names import REDACTED, Secret, is_secret_name, normalise_name


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


def test_secret_type_never_prints() -> None:
    s = Secret("xoxb-123-456")
    assert str(s) == REDACTED and "xoxb" not in repr(s) and f"{s}" == REDACTED
    assert s.reveal() == "xoxb-123-456"


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
def test_not_secret_names_any_spelling(name: str) -> None:
    assert not is_secret_name(name)


def test_names_normalise_to_one_spelling() -> None:
    assert normalise_name("apiKey") == normalise_name("api-key") == normalise_name("--api-key") == "API_KEY"
    assert normalise_name("X-Api-Key") == "X_API_KEY"
