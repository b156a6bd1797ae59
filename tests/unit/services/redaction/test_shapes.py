"""services/redaction/shapes.py: token shapes gitleaks has no rule for, URL credentials and passwords on
printed command lines — replaced wherever they appear, with the rest of the line kept."""

from __future__ import annotations

import pytest

from services.redaction import shapes


@pytest.mark.parametrize("token", [
    "nvapi-AbCdEfGhIjKlMnOpQrStUvWxYz012345",  # NVIDIA
    "hf_abcdefghijklmnopqrstuvwxyz12",  # Hugging Face, digits included
    "sk-abcdefghij0123456789",  # any sk-… key
    "r8_abcdefghijklmnopqrstuvwxyz0123456789",  # Replicate
    "AKIAIOSFODNN7EXAMPLE",  # AWS's documented example key (gitleaks allows it on purpose)
])
def test_provider_tokens_without_a_gitleaks_rule_go(token: str) -> None:
    assert shapes.SHAPE_HINT.search(token)
    assert shapes.TOKEN_SHAPES.sub(shapes.keep_lines, f"key {token} in use") == "key [redacted] in use"


@pytest.mark.parametrize("text", ["tokenizer sk-", "skill-level 3", "key-value store"])
def test_words_that_only_start_like_a_token_stay(text: str) -> None:
    assert shapes.TOKEN_SHAPES.sub(shapes.keep_lines, text) == text


def test_a_pem_block_over_journal_lines_stays_as_many_lines() -> None:
    pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePz\n-----END RSA PRIVATE KEY-----"
    out = shapes.TOKEN_SHAPES.sub(shapes.keep_lines, f"key: {pem} done")
    assert out == "key: [redacted]\n[redacted]\n[redacted] done"


def test_url_credentials() -> None:
    assert shapes.URL_USERINFO.sub(shapes.userinfo, "postgres://app:p4ss@db:5432/x") == \
        "postgres://app:[redacted]@db:5432/x"
    token_as_user = "https://ghp_abc123def456ghi789@github.com/o/r"
    assert shapes.URL_USER().sub(shapes.user_only, token_as_user) == "https://[redacted]@github.com/o/r"
    assert shapes.URL_USER().sub(shapes.user_only, "https://alice@host/x") == "https://alice@host/x"  # a login


@pytest.mark.parametrize(("line", "shown"), [
    ("mysql -u root -pS3cret db", "mysql -u root -p[redacted] db"),
    ("redis-cli -h h -a hunter2 ping", "redis-cli -h h -a [redacted] ping"),
    ('sshpass -p "a b" ssh h', 'sshpass -p "[redacted]" ssh h'),
])
def test_passwords_on_printed_command_lines(line: str, shown: str) -> None:
    assert shapes.CMD_PASSWORD().sub(shapes.cmd_password, line) == shown
