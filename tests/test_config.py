"""Config loading: the contract keys, defaults, and a clear message (file, key, fix) for each mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.loader import ConfigError, find_config, load_config, parse_config

GOOD = """
[[nodes]]
name = "gpu-a"
host = "10.1.230.174"
port = 22
user = "ops"
key_file = "~/.ssh/inferbot_ed25519"
known_hosts = "~/.ssh/known_hosts"

[[services]]
name = "kimi"
node = "gpu-a"
unit = "vllm-kimi-k25-int4.service"
api_url = "http://127.0.0.1:8000"

[access]
restart_users = ["U01ABCDEF"]
confirm_ttl = "120s"
cooldown = 0

[watch]
interval = "60s"
poll = "15s"
max_load = "1h"
"""


def test_contract_config_parses_with_durations() -> None:
    cfg = parse_config(GOOD, "inferbot.toml")
    assert cfg.nodes[0].name == "gpu-a" and cfg.nodes[0].port == 22
    assert cfg.services[0].unit == "vllm-kimi-k25-int4.service"
    assert cfg.access.confirm_ttl == 120 and cfg.access.cooldown == 0
    assert cfg.watch.max_load == 3600 and cfg.watch.poll == 15
    assert cfg.access.restart_command == "sudo -n systemctl restart {unit}"


def test_example_config_is_valid() -> None:
    text = (Path(__file__).parent.parent / "config" / "example.toml").read_text()
    cfg = parse_config(text, "example.toml")
    assert {n.name for n in cfg.nodes} == {"gpu-a", "gpu-b"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[[nodes]]\nname='GPU A'\nhost='h'\n", "[[nodes]] #1 ('GPU A') → name"),
        ("[[nodes]]\nname='a'\n", "[[nodes]] #1 ('a') → host: this key is required"),
        ("[[nodes]]\nname='a'\nhost='h'\nport=70000\n", "port"),
        ("[[nodes]]\nname='a'\nhost='h'\nhostname='x'\n", "hostname: unknown key"),
        ("[[nodes]]\nname='a'\nhost='h'\n[[services]]\nname='k'\nnode='b'\nunit='x.service'\n",
         "service 'k' names node 'b', which is not in [[nodes]] (known: a)"),
        ("[[nodes]]\nname='a'\nhost='h'\n[[services]]\nname='k'\nnode='a'\nunit='x; rm -rf /'\n",
         "is not a systemd service name"),
        ("[[nodes]]\nname='a'\nhost='h'\n[[services]]\nname='k'\nnode='a'\nunit='x.service'\nbench_dir='/x;y'\n",
         "a path may only use"),
        ("[access]\nrestart_users=['alice']\n", "not a Slack user id"),
        ("[access]\nrestart_command='systemctl restart {unit}; reboot'\n", "one plain command"),
        ("[access]\ncooldown='ten minutes'\n", "is not a duration"),
        ("not = [valid", "not valid TOML"),
    ],
)
def test_bad_config_names_the_key_and_fix(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(text, "bad.toml")
    assert str(e.value).startswith("bad.toml: ")
    assert expected in str(e.value)


def test_missing_file_says_how_to_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("INFERBOT_CONFIG", raising=False)
    with pytest.raises(ConfigError, match=r"inferbot.toml: config file not found — pass --config FILE"):
        load_config(None)


def test_config_search_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERBOT_CONFIG", str(tmp_path / "env.toml"))
    assert find_config("cli.toml") == Path("cli.toml")
    assert find_config(None) == tmp_path / "env.toml"
    monkeypatch.delenv("INFERBOT_CONFIG")
    assert find_config(None) == Path("inferbot.toml")
