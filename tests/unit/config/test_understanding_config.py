"""``[understanding]``: the model's help is off by default, names a configured service, and waits briefly."""

from __future__ import annotations

import pytest

from config.loader import ConfigError, parse_config

BASE = """
[[nodes]]
name = "gpu-a"
host = "10.0.0.5"

[[services]]
name = "qwen"
node = "gpu-a"
unit = "vllm-qwen.service"
"""


def test_off_by_default_with_a_one_second_timeout() -> None:
    u = parse_config(BASE).understanding
    assert u.model is None and u.timeout == 1.0


def test_keys_parse() -> None:
    u = parse_config(BASE + '\n[understanding]\nmodel = "qwen"\ntimeout = "500ms"\n').understanding
    assert u.model == "qwen" and u.timeout == 0.5


@pytest.mark.parametrize(("extra", "words"), [
    ('model = "llama"', "not a service in [[services]] (known: qwen)"),
    ('model = "qwen"\ntimeout = "30s"', "timeout"),
    ('model = "qwen"\ntimeout = "0s"', "timeout"),
    ('model = "Qwen; id"', "lower-case letters"),
])
def test_mistakes_are_one_readable_line(extra: str, words: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(BASE + "\n[understanding]\n" + extra + "\n")
    assert words in str(e.value)
