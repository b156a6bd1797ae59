"""Config loading: the contract keys, defaults, and a clear message (file, key, fix) for each mistake."""

from __future__ import annotations

from pathlib import Path

import pytest

from config.loader import ConfigError, find_config, load_config, parse_config
from config.models import BotConfig

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
    assert cfg.access.restart_command == "sudo -n systemctl restart -- {unit}"  # issue 10 adds "--"


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


# ---- issue 10: a trailing newline, a leading dash, non-UTF-8 and empty files

NODE = "[[nodes]]\nname='a'\nhost='h'\n"
SVC = NODE + "[[services]]\nname='k'\nnode='a'\nunit='x.service'\n"


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('[[nodes]]\nname="a\\n"\nhost="h"\n', "[[nodes]] #1 ('a\\n') → name"),
        ('[[nodes]]\nname="a"\nhost="h\\n"\n', "[[nodes]] #1 ('a') → host"),
        ('[[nodes]]\nname="a"\nhost="h"\nuser="ops\\n"\n', "[[nodes]] #1 ('a') → user"),
        (NODE + '[[services]]\nname="k"\nnode="a"\nunit="x.service\\n"\n', "[[services]] #1 ('k') → unit"),
        (NODE + '[[services]]\nname="k\\n"\nnode="a"\nunit="x.service"\n', "[[services]] #1 ('k\\n') → name"),
        (SVC + 'log_file="/v/l\\n"\n', "[[services]] #1 ('k') → log_file"),
        (SVC + 'api_url="http://h:1\\n"\n', "[[services]] #1 ('k') → api_url"),
        (SVC + 'api_key_env="KIMI_KEY\\n"\n', "[[services]] #1 ('k') → api_key_env"),
        ('[access]\nrestart_users=["U01ABCDEF\\n"]\n', "access → restart_users"),
        ('[access]\nrestart_usergroups=["S01ABCDEF\\n"]\n', "access → restart_usergroups"),
        ('[access]\nrestart_channels=["C01ABCDEF\\n"]\n', "access → restart_channels"),
        ('[notify]\nchannel="C01ABCDEF\\n"\n', "notify → channel"),
        ('[audit]\nchannel="#ops"\n', "audit → channel"),
    ],
)
def test_trailing_newline_and_other_near_misses_are_refused_with_the_key(text: str, key: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_config(text, "bad.toml")
    assert str(e.value).startswith(f"bad.toml: {key}: "), str(e.value)


def test_unit_starting_with_a_dash_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"unit: '--force.service' starts with '-'"):
        parse_config(SVC.replace("x.service", "--force.service"), "bad.toml")
    with pytest.raises(ConfigError, match=r"host: '-oProxyCommand=x' is not a host"):
        parse_config(NODE.replace("host='h'", "host='-oProxyCommand=x'"), "bad.toml")


def test_default_restart_command_ends_options_before_the_unit() -> None:
    from services.node.restart import build_restart_command

    cfg = parse_config(SVC, "ok.toml")
    assert build_restart_command(cfg.access, cfg.services[0]) == "sudo -n systemctl restart -- x.service"


def test_config_that_is_not_utf8_is_one_config_error(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(NODE.replace("'h'", "'h' # caf\xe9").encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin1.toml: not UTF-8 text .*save the config as UTF-8"):
        load_config(str(path))


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n"])
def test_empty_config_says_what_to_add(tmp_path: Path, text: str) -> None:
    path = tmp_path / "empty.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"empty.toml: the config is empty — add a \[\[nodes\]\] block"):
        load_config(str(path))


def test_lookups_by_name_find_what_a_scan_of_the_lists_finds() -> None:
    config = BotConfig.model_validate({
        "nodes": [{"name": f"n{i}", "host": f"127.0.0.{i + 2}"} for i in range(5)],
        "services": [{"name": f"s{i % 3}", "node": f"n{i % 5}", "unit": f"u{i}.service"} for i in range(12)],
    })
    for n in config.nodes:
        assert config.node(n.name) is n
        assert config.services_on(n.name) == [s for s in config.services if s.node == n.name]
        for s in config.services:
            found = next((x for x in config.services if x.name == s.name and x.node == n.name), None)
            assert config.service(s.name, n.name) is found
    with pytest.raises(KeyError):
        config.node("nope")
    assert config.services_on("nope") == [] and config.service("s0", "nope") is None
    # A copy with other lists answers from them, never from the original's.
    moved = config.model_copy(update={"nodes": [config.nodes[0].model_copy(update={"host": "127.0.0.99"})],
                                      "services": config.services[:1]})
    assert moved.node("n0").host == "127.0.0.99" and moved.services_on("n1") == []
    assert config.node("n0").host == "127.0.0.2"
    assert config == BotConfig.model_validate(config.model_dump())  # the index is no part of the model
