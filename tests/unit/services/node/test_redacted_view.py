"""services/node/redacted_view.py: flags, command lines and launchers as an answer shows them — every secret
replaced, everything else exactly as the process received it."""

from __future__ import annotations

import json

from services.node.redacted_view import launcher_text, redact_argv, redact_flags, short, shown_flags
from services.redact import REDACTED, Redactor

KV_JSON = '{"kv_connector":"LMCacheConnectorV1",  "kv_role":"kv_both"}'


def test_flag_values_lose_their_secrets_by_name_and_by_known_value() -> None:
    flags = {"api-key": ["sk-one-1111", "sk-two-2222"], "hf-token": "hf_abcdefghijklmnop", "port": "8000",
             "enforce-eager": True, "served-model-name": ["kimi", "kimi-k2"],
             "chat-template": "/etc/vllm/tpl-with-known-value-4242.jinja"}
    out = redact_flags(flags, Redactor(["known-value-4242"]))
    assert out == {"api-key": [REDACTED, REDACTED], "hf-token": REDACTED, "port": "8000", "enforce-eager": True,
                   "served-model-name": ["kimi", "kimi-k2"], "chat-template": f"/etc/vllm/tpl-with-{REDACTED}.jinja"}


def test_a_value_redaction_did_not_change_is_shown_as_passed() -> None:
    secret_json = '{"kv_connector": "x", "aws_secret_access_key": "AKIAXXXXXXXX"}'
    original = {"kv-transfer-config": KV_JSON, "extra": secret_json, "port": "8000"}
    redacted = redact_flags(original, Redactor())
    shown, changed = shown_flags(original, redacted)
    assert shown["kv-transfer-config"] == KV_JSON  # its spacing and key order, as the process received it
    assert "AKIAXXXXXXXX" not in str(shown["extra"]) and REDACTED in str(shown["extra"])
    assert changed == ["extra"]
    # A redaction that rewrote a JSON value without removing anything from it (the same object, re-spaced)
    # changed nothing a person needs to know: the value is shown as passed and not listed as redacted.
    respaced = json.dumps(json.loads(KV_JSON))
    assert respaced != KV_JSON
    assert shown_flags({"kv-transfer-config": KV_JSON}, {"kv-transfer-config": respaced}) == (
        {"kv-transfer-config": KV_JSON}, [])


def test_command_lines_keep_their_shape_without_the_secrets() -> None:
    argv = ["vllm", "serve", "/m", "--api-key", "sk-abc", "--hf-token=hf_xyz", "--port", "8000", "--api-key",
            "--host", "::"]
    assert redact_argv(argv) == ["vllm", "serve", "/m", "--api-key", REDACTED, f"--hf-token={REDACTED}", "--port",
                                 "8000", "--api-key", "--host", "::"]
    line = short(argv * 5, limit=60)
    assert len(line) == 60 and line.endswith("…") and "sk-abc" not in line
    assert short(["vllm", "serve", "/m"]) == "vllm serve /m"


def test_launchers_are_shown_by_program_name() -> None:
    assert launcher_text(["/usr/bin/sudo", "-u", "vllm"]) == "sudo -u vllm"
    assert launcher_text(["/home/ops/.local/bin/uv", "run", "--project", "/opt/app"]) == "uv run --project /opt/app"
    assert launcher_text(["numactl", "--cpunodebind=0", "/opt/venv/bin/python3"]) == "numactl --cpunodebind=0 python3"
    assert launcher_text(["/usr/bin/sudo", "--api-key", "sk-abc"]) == f"sudo --api-key {REDACTED}"
    assert len(launcher_text(["/usr/bin/sudo", "-u", "x" * 100])) == 60
