"""Unit files as systemctl cat prints them, systemd command-line splitting, environment files."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.parse.unitfile import (
    expand_exec_start,
    merge_environment,
    parse_docker_env_file,
    parse_env_file,
    parse_unit_cat,
    split_command,
    unit_specifiers,
)
from services.parse.vllm_args import parse_vllm_argv

SAMPLES = Path(__file__).parent / "samples" / "units"


def sample(name: str) -> str:
    return (SAMPLES / name).read_text()


# --- split_command ---------------------------------------------------------------------------------------


def test_split_quotes_and_mid_word_quotes() -> None:
    line = """/v/vllm serve m --chat-template "/etc/vllm/my tpl.jinja" --compilation-config='{"a":1}' 'x y'"""
    assert split_command(line, {}, {}) == [
        "/v/vllm", "serve", "m", "--chat-template", "/etc/vllm/my tpl.jinja",
        '--compilation-config={"a":1}', "x y",
    ]  # fmt: skip


def test_split_c_escapes() -> None:
    assert split_command(r'echo a\x41 "tab\there" \"q\" \\ x\;', {}, {}) == [
        "echo",
        "aA",
        "tab\there",
        '"q"',
        "\\",
        "x;",
    ]


def test_split_specifiers_and_literal_percent() -> None:
    spec = {"i": "8004", "n": "vllm@8004.service"}
    assert split_command("/v/vllm --port %i --x 100%% --name %n --home %h", {}, spec) == [
        "/v/vllm", "--port", "8004", "--x", "100%", "--name", "vllm@8004.service", "--home", "%h",
    ]  # fmt: skip


def test_split_dollar_var_whole_word_splits_braced_stays_one_word() -> None:
    env = {"EXTRA": "--enforce-eager  --max-num-seqs 64", "MODEL": "/models/my model", "EMPTY": ""}
    argv = split_command("vllm serve ${MODEL} $EXTRA --tag=${MODEL}x $EMPTY $UNSET ${UNSET}", env, {})
    assert argv == [
        "vllm",
        "serve",
        "/models/my model",
        "--enforce-eager",
        "--max-num-seqs",
        "64",
        "--tag=/models/my modelx",
        "",
    ]


def test_split_dollar_glued_not_expanded_and_double_dollar() -> None:
    env = {"MODEL": "/m", "HOME": "/root"}
    argv = split_command("""/bin/bash -c 'exec vllm serve "$MODEL" --x=$HOME $$PATH'""", env, {})
    assert argv == ["/bin/bash", "-c", 'exec vllm serve "$MODEL" --x=$HOME $PATH']
    assert split_command("echo $MODEL/sub $$MODEL", env, {}) == ["echo", "$MODEL/sub", "$MODEL"]


def test_split_exec_prefixes() -> None:
    assert split_command("-/usr/bin/docker rm -f vllm", {}, {}) == ["/usr/bin/docker", "rm", "-f", "vllm"]
    assert split_command("+!/v/vllm serve m", {}, {}) == ["/v/vllm", "serve", "m"]
    assert split_command("!!/v/vllm serve m", {}, {}) == ["/v/vllm", "serve", "m"]
    # "@": the path is exec'd, the second word becomes argv[0].
    assert split_command("@/opt/vllm/venv/bin/python3 vllm-api -m x", {}, {}) == ["vllm-api", "-m", "x"]
    # ":": no environment expansion at all.
    assert split_command(":/bin/echo $X ${X}", {"X": "1"}, {}) == ["/bin/echo", "$X", "${X}"]
    assert split_command("-@/bin/sh sh -c true", {}, {}) == ["sh", "-c", "true"]


def test_split_stops_at_lone_semicolon_but_not_quoted_one() -> None:
    assert split_command("/bin/a x ; /bin/b y", {}, {}) == ["/bin/a", "x"]
    assert split_command('/bin/a ";" x', {}, {}) == ["/bin/a", ";", "x"]


# --- parse_unit_cat ---------------------------------------------------------------------------------------


def test_kimi_unit() -> None:
    u = parse_unit_cat(sample("vllm-kimi.cat"))
    assert u.paths == ["/etc/systemd/system/vllm-kimi.service"]
    assert u.description == "vLLM Kimi-K2.5 (INT4, TP8)"
    assert (u.user, u.working_directory, u.restart) == ("vllm", "/opt/vllm", "on-failure")
    assert u.environment == {
        "NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "NCCL_P2P_LEVEL": "SYS", "NCCL_MAX_NCHANNELS": "16",
        "NCCL_BUFFSIZE": "16777216", "NCCL_NTHREADS": "512", "CUDA_DEVICE_MAX_CONNECTIONS": "1",
    }  # fmt: skip
    assert u.environment_files == [("/etc/vllm/kimi.env", False)]
    # $$ became $ and the inner double quotes survive for bash.
    assert u.exec_start_pre == [[
        "/bin/bash", "-c",
        'for i in $(seq 1 30); do [ "$(nvidia-smi -L | wc -l)" -ge 8 ] && exit 0; sleep 2; done; exit 1',
    ]]  # fmt: skip
    # Without the EnvironmentFile the key is unknown: ${VLLM_API_KEY} is one empty word, as systemd does.
    assert u.exec_start[-2:] == ["--api-key", ""]
    assert u.exec_start[:3] == ["/opt/vllm/venv/bin/vllm", "serve", "/shared/kimi-k2.5-int4"]
    assert len(u.exec_start_lines) == 1 and u.exec_start_lines[0].endswith("--api-key ${VLLM_API_KEY}")


def test_kimi_unit_with_environment_file_overrides() -> None:
    u = parse_unit_cat(sample("vllm-kimi.cat"))
    env_file = parse_env_file(sample("kimi.env"))
    env = merge_environment(u, [env_file])
    # The file overrides Environment= (NCCL_BUFFSIZE) and adds the secrets.
    assert env["NCCL_BUFFSIZE"] == "33554432"
    assert env["NCCL_PROTO"] == "LL"
    assert env["VLLM_API_KEY"] == "sk-kimi-0123456789abcdef"
    argv = expand_exec_start(u, env=env)
    assert argv[-2:] == ["--api-key", "sk-kimi-0123456789abcdef"]
    cmd = parse_vllm_argv(argv)
    assert cmd.model == "/shared/kimi-k2.5-int4"
    assert cmd.flags == {
        "served-model-name": ["kimi-k2.5"], "tensor-parallel-size": "8", "max-model-len": "131072",
        "gpu-memory-utilization": "0.95", "tool-call-parser": "kimi_k2", "reasoning-parser": "kimi_k2",
        "enable-auto-tool-choice": True, "trust-remote-code": True, "host": "0.0.0.0", "port": "8000",
        "api-key": ["sk-kimi-0123456789abcdef"],
    }  # fmt: skip


def test_drop_in_resets_exec_start_and_continuation_comments() -> None:
    u = parse_unit_cat(sample("vllm-qwen-dropin.cat"))
    assert u.paths == [
        "/etc/systemd/system/vllm-qwen.service",
        "/etc/systemd/system/vllm-qwen.service.d/override.conf",
    ]
    assert u.environment == {"TP": "2", "PYTHONPATH": "/opt/vllm plugins/lib", "VLLM_LOGGING_LEVEL": "DEBUG"}
    assert u.environment_files == [("/etc/vllm/qwen.env", True)]
    assert u.exec_start == [
        "/opt/vllm/.venv/bin/vllm", "serve", "Qwen/Qwen3-32B", "-tp", "2", "--port", "8001",
        '--compilation-config={"cudagraph_mode": "FULL_AND_PIECEWISE"}',
    ]  # fmt: skip
    # The overridden fragment ExecStart (with its continuation) is gone.
    assert len(u.exec_start_lines) == 1


def test_continuation_skips_comment_lines() -> None:
    text = (
        "# /etc/systemd/system/x.service\n[Service]\nExecStart=/v/vllm serve m \\\n"
        "    --tensor-parallel-size 2 \\\n    # --swap-space 16 \\\n; another comment\n    --port 8000\n"
    )
    assert parse_unit_cat(text).exec_start == [
        "/v/vllm",
        "serve",
        "m",
        "--tensor-parallel-size",
        "2",
        "--port",
        "8000",
    ]


def test_template_instance_specifiers() -> None:
    u = parse_unit_cat(sample("vllm-template.cat"), unit_name="vllm@8004.service")
    assert u.exec_start == [
        "/opt/vllm/venv/bin/vllm", "serve", "/models/llama-8b", "--port", "8004", "--enable-prefix-caching",
        "--max-num-seqs", "64", "--served-model-name", "llama-8004",
    ]  # fmt: skip
    assert u.description == "vLLM on port 8004 (vllm@8004.service)"
    assert u.working_directory == "/srv/vllm/8004"
    assert u.environment["LOG_PREFIX"] == "[vllm-8004]"
    # Same result when only the instance is given: the template header supplies the rest.
    assert parse_unit_cat(sample("vllm-template.cat"), instance="8004").exec_start == u.exec_start
    assert parse_vllm_argv(u.exec_start).flags["port"] == "8004"


def test_template_without_instance_keeps_specifier_literal() -> None:
    u = parse_unit_cat(sample("vllm-template.cat"))
    assert u.exec_start[3:5] == ["--port", "%i"]


def test_unit_specifiers() -> None:
    assert unit_specifiers("vllm@gpu\\x2d0.service") == {
        "n": "vllm@gpu\\x2d0.service", "N": "vllm@gpu\\x2d0", "p": "vllm", "P": "vllm", "j": "vllm",
        "J": "vllm", "i": "gpu\\x2d0", "I": "gpu-0",
    }  # fmt: skip


def test_environment_reset_and_quoting_and_no_dollar_expansion() -> None:
    text = (
        "# /etc/systemd/system/x.service\n[Service]\nEnvironment=OLD=1\n"
        "# /etc/systemd/system/x.service.d/env.conf\n[Service]\nEnvironment=\n"
        "Environment=\"A=1 2\" 'B=x y' C=$HOME D=100%% NOT_AN_ITEM\nEnvironment=A=3\n"
        "EnvironmentFile=-/etc/vllm/%N.env\nExecStart=/bin/true\n"
    )
    u = parse_unit_cat(text)
    assert u.environment == {"A": "3", "B": "x y", "C": "$HOME", "D": "100%"}
    assert u.environment_files == [("/etc/vllm/x.env", True)]


def test_environment_file_reset_and_exec_start_pre_list() -> None:
    text = (
        "# /etc/systemd/system/x.service\n[Service]\nEnvironmentFile=/a.env\nExecStartPre=/bin/a\n"
        "ExecStartPre=-/bin/b --flag\n# /etc/systemd/system/x.service.d/o.conf\n[Service]\n"
        "EnvironmentFile=\nEnvironmentFile=/b.env\nExecStartPre=/bin/c\n"
    )
    u = parse_unit_cat(text)
    assert u.environment_files == [("/b.env", False)]
    assert u.exec_start_pre == [["/bin/a"], ["/bin/b", "--flag"], ["/bin/c"]]
    assert u.exec_start == []


def test_keys_outside_service_section_are_ignored() -> None:
    text = "# /etc/systemd/system/x.service\n[Install]\nExecStart=/bin/nope\n[Service]\nExecStart=/bin/yes\n"
    assert parse_unit_cat(text).exec_start == ["/bin/yes"]


# --- environment files --------------------------------------------------------------------------------


def test_env_file_systemd_format() -> None:
    text = (
        "# comment\n; other comment\n\n  SPACED =  value with trailing   \nSINGLE='a \"b\" $c \\n'\n"
        'DOUBLE="x \\"y\\" \\\\ \\` \\$HOME \\n"\nCONT=one \\\ntwo\nNOEQUALS\nexport EXPORTED=yes\n'
        "EMPTY=\nURL=http://h/x?a=1\n"
    )
    assert parse_env_file(text) == {
        "SPACED": "value with trailing",
        "SINGLE": 'a "b" $c \\n',
        "DOUBLE": 'x "y" \\ ` $HOME \\n',
        "CONT": "one two",
        "EXPORTED": "yes",
        "EMPTY": "",
        "URL": "http://h/x?a=1",
    }


def test_env_file_kimi_sample() -> None:
    assert parse_env_file(sample("kimi.env")) == {
        "HF_TOKEN": "hf_kimiSecretToken0123456789",
        "VLLM_API_KEY": "sk-kimi-0123456789abcdef",
        "NCCL_BUFFSIZE": "33554432",
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("A=1\n", {"A": "1"}),
        ('A="quoted"\n', {"A": '"quoted"'}),
        ("  # comment\nHF_TOKEN\n", {"HF_TOKEN": None}),
        ("B=with trailing  \n", {"B": "with trailing  "}),
        ("C=a=b\n\n", {"C": "a=b"}),
        ("BAD NAME=1\n", {}),
    ],
)
def test_docker_env_file(text: str, expected: dict[str, str | None]) -> None:
    assert parse_docker_env_file(text) == expected
