"""``[services.changes]``: defaults, validation, and one readable line for each mistake."""

from __future__ import annotations

import pytest

from config.loader import ConfigError, parse_config

BASE = """
[[nodes]]
name = "gpu-a"
host = "10.0.0.5"

[[services]]
name = "kimi"
node = "gpu-a"
unit = "vllm-kimi.service"
"""


def test_defaults_are_off_and_safe() -> None:
    svc = parse_config(BASE).services[0]
    c = svc.changes
    assert not c.enabled and c.rollback and c.max_parallel == 1 and c.verify_window == 600
    assert svc.dropin_path() == "/etc/systemd/system/vllm-kimi.service.d/90-inferbot.conf"


def test_keys_parse() -> None:
    svc = parse_config(BASE + """
[services.changes]
enabled = true
allow_flags = ["--max_num_seqs", "speculative-*"]
deny_env = ["CUDA_*"]
verify_window = "15m"
max_parallel = 2
dropin = "/run/systemd/system/vllm-kimi.service.d/zz-inferbot.conf"
""").services[0]
    assert svc.changes.allow_flags == ["max-num-seqs", "speculative-*"]  # one spelling, as vLLM reads them
    assert svc.changes.verify_window == 900 and svc.dropin_path().endswith("zz-inferbot.conf")


@pytest.mark.parametrize(("table", "expected"), [
    ('dropin = "/etc/systemd/system/other.service.d/90-inferbot.conf"', "not in the unit's drop-in directory"),
    ('dropin = "/etc/systemd/system/vllm-kimi.service.d/90-inferbot"', "ends in .conf"),
    ('dropin = "relative/vllm-kimi.service.d/x.conf"', "absolute path"),
    ('dropin = "/etc/systemd/system/vllm-kimi.service.d/a b.conf"', "a path may only use"),
    ('allow_flags = ["max num; rm"]', "not a vLLM flag name"),
    ('deny_env = ["NCCL PROTO"]', "not an environment variable name"),
    ('max_parallel = 0', "greater than or equal to 1"),
    ('verify_window = "soon"', "not a duration"),
    ('enabeld = true', "unknown key"),
])
def test_mistakes_name_the_key(table: str, expected: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(BASE + "\n[services.changes]\n" + table + "\n")
    assert "changes" in str(e.value) and expected in str(e.value)
