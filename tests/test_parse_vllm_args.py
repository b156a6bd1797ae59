"""vLLM command lines: every wrapper form, normalisation like vLLM's parser, secrets (the flags' groups and
warnings: tests/unit/services/parse/test_vllm_flags.py)."""

from __future__ import annotations

import json

import pytest
import yaml

from services.parse.unitfile import split_command
from services.parse.vllm_args import (
    MODEL_FLAG_DEPRECATED,
    is_wrapped,
    parse_vllm_argv,
    secret_values,
)

# Exactly as /proc/PID/cmdline shows a console script (NUL-separated, split here).
PROC_CMDLINE = (
    b"/opt/vllm/venv/bin/python3\0/opt/vllm/venv/bin/vllm\0serve\0/models/x\0--port\0008000\0"
    b"--served-model-name\0x\0x-alias\0"
)


def test_vllm_serve_positional() -> None:
    cmd = parse_vllm_argv(
        ["/opt/vllm/.venv/bin/vllm", "serve", "meta-llama/Llama-3.1-8B-Instruct", "--port", "8000"]
    )
    assert cmd.wrapper == "vllm-serve"
    assert cmd.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert cmd.model_source == "positional"
    assert cmd.flags == {"port": "8000"}
    assert cmd.notes == []


@pytest.mark.parametrize(
    "argv",
    [
        ["vllm", "serve", "--model", "Qwen/Qwen3-32B", "--port", "8000"],
        ["vllm", "serve", "--port", "8000", "--model=Qwen/Qwen3-32B"],
    ],
)
def test_vllm_serve_model_flag(argv: list[str]) -> None:
    cmd = parse_vllm_argv(argv)
    assert cmd.model == "Qwen/Qwen3-32B"
    assert cmd.model_source == "flag"
    assert cmd.flags == {"port": "8000"}
    assert "model" not in cmd.flags
    assert MODEL_FLAG_DEPRECATED in cmd.notes


def test_console_script_with_interpreter_prefix() -> None:
    argv = [a.decode() for a in PROC_CMDLINE.rstrip(b"\0").split(b"\0")]
    cmd = parse_vllm_argv(argv)
    assert cmd.wrapper == "vllm-serve"
    assert cmd.model == "/models/x"
    assert cmd.flags == {"port": "8000", "served-model-name": ["x", "x-alias"]}


def test_python_module_api_server_ignores_positional() -> None:
    cmd = parse_vllm_argv(
        ["/usr/bin/python3", "-u", "-m", "vllm.entrypoints.openai.api_server", "stray/model", "--model",
         "mistralai/Mistral-7B", "--port", "8001"]
    )  # fmt: skip
    assert cmd.wrapper == "api-server-module"
    assert cmd.model == "mistralai/Mistral-7B"
    assert cmd.flags == {"port": "8001"}
    assert any("stray/model" in n and "ignored" in n for n in cmd.notes)
    assert MODEL_FLAG_DEPRECATED not in cmd.notes


def test_python_module_without_model_flag_has_no_model() -> None:
    cmd = parse_vllm_argv(["python", "-m", "vllm.entrypoints.openai.api_server", "some/model"])
    assert cmd.model is None
    assert any("Qwen/Qwen3-0.6B" in n for n in cmd.notes)


def test_bash_c_with_exec_and_unresolved_variables() -> None:
    # ExecStart=/bin/bash -lc 'source /etc/vllm/env.sh && exec /opt/vllm/venv/bin/vllm serve "$MODEL" ...'
    argv = split_command(
        "/bin/bash -lc 'source /etc/vllm/env.sh && "
        'exec /opt/vllm/venv/bin/vllm serve "$MODEL" --tensor-parallel-size 4 '
        '--speculative-config \\\'{"method": "eagle3"}\\\' --port $PORT --root-path ${ROOT} 2>&1\'',
        {"ROOT": "/llm", "PORT": "9999"},
        {},
    )
    cmd = parse_vllm_argv(argv)
    assert cmd.wrapper == "bash"
    assert cmd.model == "$MODEL"
    assert cmd.flags == {
        "tensor-parallel-size": "4",
        "speculative-config": '{"method": "eagle3"}',
        "port": "$PORT",  # glued inside the script: systemd leaves it to bash
        "root-path": "/llm",  # ${ROOT} is expanded by systemd even inside the script
    }
    assert any("$MODEL" in n and "$PORT" in n for n in cmd.notes)


def test_sh_c_python_module_after_semicolon() -> None:
    cmd = parse_vllm_argv(
        ["sh", "-c", "nvidia-smi; python3 -m vllm.entrypoints.openai.api_server --model /m --port 9000"]
    )
    assert cmd.wrapper == "bash"
    assert cmd.model == "/m"
    assert cmd.flags == {"port": "9000"}


def test_docker_run_with_options_and_flags_after_image() -> None:
    argv = [
        "/usr/bin/docker", "run", "--rm", "--name", "vllm-qwen235b", "--gpus", "all", "-it", "--ipc=host",
        "-p", "8000:8000", "-v", "/models:/models", "-e", "HF_TOKEN=hf_dockerSecret12345",
        "--env", "NCCL_DEBUG=INFO", "-e", "VLLM_LOGGING_LEVEL", "--env-file", "/etc/vllm/qwen.env",
        "--env-file=/etc/vllm/extra.env", "--shm-size", "16g", "--ulimit", "memlock=-1",
        "vllm/vllm-openai:v0.11.0", "--model", "Qwen/Qwen3-235B-A22B", "-tp", "8", "--enable-expert-parallel",
    ]  # fmt: skip
    cmd = parse_vllm_argv(argv)
    assert cmd.wrapper == "docker"
    assert cmd.docker_image == "vllm/vllm-openai:v0.11.0"
    assert cmd.model == "Qwen/Qwen3-235B-A22B"
    assert cmd.flags == {"tensor-parallel-size": "8", "enable-expert-parallel": True}
    assert cmd.docker_env == {
        "HF_TOKEN": "hf_dockerSecret12345",
        "NCCL_DEBUG": "INFO",
        "VLLM_LOGGING_LEVEL": "",
    }
    assert cmd.docker_env_files == ["/etc/vllm/qwen.env", "/etc/vllm/extra.env"]
    assert any("VLLM_LOGGING_LEVEL" in n and "host" in n for n in cmd.notes)
    assert secret_values(cmd) == ["hf_dockerSecret12345"]


def test_podman_run_glued_short_options_and_vllm_serve_after_image() -> None:
    argv = [
        "podman", "run", "-d", "-p8000:8000", "-e=HF_HUB_OFFLINE=1", "--device", "nvidia.com/gpu=all",
        "-w", "/srv", "--entrypoint", "vllm", "docker.io/library/custom-vllm:1", "serve", "/models/m", "-O3",
    ]  # fmt: skip
    cmd = parse_vllm_argv(argv)
    assert cmd.wrapper == "docker"
    assert cmd.docker_image == "docker.io/library/custom-vllm:1"
    assert cmd.docker_env == {"HF_HUB_OFFLINE": "1"}
    assert cmd.model == "/models/m"
    assert cmd.flags == {"optimization-level": "3"}


def test_docker_image_with_python_module_command() -> None:
    argv = ["docker", "run", "--gpus", "all", "my/vllm:2", "python3", "-m",
            "vllm.entrypoints.openai.api_server", "--model", "/m"]  # fmt: skip
    cmd = parse_vllm_argv(argv)
    assert (cmd.wrapper, cmd.docker_image, cmd.model) == ("docker", "my/vllm:2", "/m")


def test_docker_vllm_openai_image_repeating_vllm_serve_is_noted() -> None:
    cmd = parse_vllm_argv(["docker", "run", "vllm/vllm-openai:latest", "vllm", "serve", "/m"])
    assert cmd.model == "/m"
    assert any("already runs `vllm serve`" in n for n in cmd.notes)


CONFIG_YAML = """
model: meta-llama/Llama-3.1-8B-Instruct
host: "127.0.0.1"
port: 6379
uvicorn_log_level: "info"
enable-prefix-caching: false
trust-remote-code: true
served-model-name: [llama, llama-8b]
speculative-config:
  method: ngram
  num_speculative_tokens: 3
gpu-memory-utilization: 0.9
"""


def test_config_yaml_merge() -> None:
    config = yaml.safe_load(CONFIG_YAML)
    cmd = parse_vllm_argv(["vllm", "serve", "--config", "/etc/vllm/llama.yaml", "--port", "8000"], config)
    assert cmd.config_file == "/etc/vllm/llama.yaml"
    assert cmd.model == "meta-llama/Llama-3.1-8B-Instruct"
    assert cmd.model_source == "config"
    assert cmd.flags == {
        "host": "127.0.0.1",
        "port": "8000",  # the command line wins
        "uvicorn-log-level": "info",
        "trust-remote-code": True,
        "served-model-name": ["llama", "llama-8b"],
        "speculative-config": json.dumps({"method": "ngram", "num_speculative_tokens": 3}),
        "gpu-memory-utilization": "0.9",
    }
    assert "enable-prefix-caching" not in cmd.flags  # false is dropped, as vLLM does
    assert "config" not in cmd.flags
    assert any("enable-prefix-caching: false" in n for n in cmd.notes)


def test_config_positional_model_wins() -> None:
    config = yaml.safe_load(CONFIG_YAML)
    cmd = parse_vllm_argv(["vllm", "serve", "/models/local", "--config", "c.yaml"], config)
    assert (cmd.model, cmd.model_source) == ("/models/local", "positional")
    assert cmd.flags["port"] == "6379"


def test_config_equals_form_is_not_loaded() -> None:
    cmd = parse_vllm_argv(["vllm", "serve", "m", "--config=c.yaml"], {"port": 1})
    assert cmd.config_file == "c.yaml"
    assert cmd.flags == {}
    assert any("--config=FILE" in n for n in cmd.notes)


def test_config_not_provided_is_noted() -> None:
    cmd = parse_vllm_argv(["vllm", "serve", "m", "--config", "c.yaml"])
    assert cmd.config_file == "c.yaml"
    assert any("c.yaml" in n and "not" in n for n in cmd.notes)


@pytest.mark.parametrize(
    "spelling",
    [["-tp", "8"], ["--tensor-parallel-size=8"], ["--tensor_parallel_size", "8"], ["-tp=8"]],
)
def test_tensor_parallel_spellings(spelling: list[str]) -> None:
    assert parse_vllm_argv(["vllm", "serve", "m", *spelling]).flags == {"tensor-parallel-size": "8"}


def test_short_aliases() -> None:
    cmd = parse_vllm_argv(
        ["vllm", "serve", "m", "-pp", "2", "-dp", "4", "-dpl", "2", "-dpa", "10.0.0.1", "-q", "fp8", "-ep",
         "-n", "2", "-r", "1", "-asc", "4", "-cc", '{"mode": 3}', "-dcp", "2"]
    )  # fmt: skip
    assert cmd.flags == {
        "pipeline-parallel-size": "2", "data-parallel-size": "4", "data-parallel-size-local": "2",
        "data-parallel-address": "10.0.0.1", "quantization": "fp8", "enable-expert-parallel": True,
        "nnodes": "2", "node-rank": "1", "api-server-count": "4", "compilation-config": '{"mode": 3}',
        "decode-context-parallel-size": "2",
    }  # fmt: skip


@pytest.mark.parametrize("spelling", [["-O3"], ["-O", "3"], ["-O=3"], ["--optimization-level", "3"]])
def test_optimization_level(spelling: list[str]) -> None:
    assert parse_vllm_argv(["vllm", "serve", "m", *spelling]).flags == {"optimization-level": "3"}


def test_no_prefix_boolean_and_last_wins() -> None:
    cmd = parse_vllm_argv(
        [
            "vllm",
            "serve",
            "m",
            "--enable-prefix-caching",
            "--no-enable-prefix-caching",
            "--port",
            "1",
            "--port",
            "2",
        ]
    )
    assert cmd.flags == {"enable-prefix-caching": False, "port": "2"}


def test_switch_before_positional_model_does_not_eat_it() -> None:
    cmd = parse_vllm_argv(["vllm", "serve", "--enforce-eager", "/models/x", "--trust-remote-code"])
    assert cmd.model == "/models/x"
    assert cmd.flags == {"enforce-eager": True, "trust-remote-code": True}


def test_unknown_flag_followed_by_flag_is_switch() -> None:
    cmd = parse_vllm_argv(["vllm", "serve", "m", "--some-new-switch", "--other-new", "val"])
    assert cmd.flags == {"some-new-switch": True, "other-new": "val"}


def test_multi_value_flags() -> None:
    cmd = parse_vllm_argv(
        ["vllm", "serve", "m", "--api-key", "k1-secret", "k2-secret", "--served-model-name", "a", "b", "c",
         "--port", "8000"]
    )  # fmt: skip
    assert cmd.flags == {
        "api-key": ["k1-secret", "k2-secret"],
        "served-model-name": ["a", "b", "c"],
        "port": "8000",
    }
    assert secret_values(cmd) == ["k1-secret", "k2-secret"]


def test_hf_token_bare_and_valued() -> None:
    assert parse_vllm_argv(["vllm", "serve", "m", "--hf-token", "--port", "1"]).flags == {
        "hf-token": True,
        "port": "1",
    }
    cmd = parse_vllm_argv(["vllm", "serve", "m", "--hf-token", "hf_abcdefgh12345"])
    assert cmd.flags == {"hf-token": "hf_abcdefgh12345"}
    assert secret_values(cmd) == ["hf_abcdefgh12345"]


def test_dotted_json_flags() -> None:
    cmd = parse_vllm_argv(
        ["vllm", "serve", "m", "--speculative-config.method", "eagle3", "-sc.num_speculative_tokens", "3",
         "--compilation_config.cudagraph_mode=FULL"]
    )  # fmt: skip
    assert cmd.flags == {
        "speculative-config.method": "eagle3",
        "speculative-config.num_speculative_tokens": "3",
        "compilation-config.cudagraph_mode": "FULL",
    }


def test_negative_number_is_a_value() -> None:
    cmd = parse_vllm_argv(["vllm", "serve", "m", "--max-model-len", "-1", "--seed", "-0.5"])
    assert cmd.flags == {"max-model-len": "-1", "seed": "-0.5"}


def test_json_value_with_spaces_after_equals() -> None:
    cmd = parse_vllm_argv(["vllm", "serve", "m", '--default-chat-template-kwargs={"enable_thinking": false}'])
    assert cmd.flags == {"default-chat-template-kwargs": '{"enable_thinking": false}'}


def test_prefix_abbreviation_is_expanded_with_note() -> None:
    cmd = parse_vllm_argv(["vllm", "serve", "m", "--max-model", "4096"])
    assert cmd.flags == {"max-model-len": "4096"}
    assert any("--max-model-len" in n for n in cmd.notes)


def test_unknown_short_option_and_extra_positional() -> None:
    cmd = parse_vllm_argv(["vllm", "serve", "m", "extra", "-z"])
    assert cmd.model == "m"
    assert cmd.unknown_flags == ["-z", "extra"]


def test_not_vllm() -> None:
    cmd = parse_vllm_argv(["/usr/bin/sleep", "100"])
    assert cmd.wrapper == "unknown"
    assert cmd.model is None


def test_launcher_prefix_is_looked_through() -> None:
    cmd = parse_vllm_argv(["numactl", "--cpunodebind=0", "/v/vllm", "serve", "m", "-tp", "2"])
    assert cmd.wrapper == "vllm-serve"
    assert (cmd.model, cmd.flags) == ("m", {"tensor-parallel-size": "2"})


def test_env_prefix_is_skipped() -> None:
    cmd = parse_vllm_argv(["/usr/bin/env", "CUDA_VISIBLE_DEVICES=0,1", "vllm", "serve", "m"])
    assert (cmd.wrapper, cmd.model) == ("vllm-serve", "m")


def test_secret_values_url_userinfo() -> None:
    cmd = parse_vllm_argv(
        ["vllm", "serve", "m", "--otlp-traces-endpoint", "https://user:s3cretpw@otel.example:4317",
         "--middleware", "a.b", "http://u:listpw@x/"]
    )  # fmt: skip
    assert secret_values(cmd) == ["s3cretpw", "listpw"]


# --- launchers that are not `vllm serve` (issue 9) ----------------------------------------------------------

SERVE_TAIL = ["serve", "/models/x", "--tensor-parallel-size", "8", "--max-model-len", "8192"]


@pytest.mark.parametrize(
    ("argv", "entry", "launcher"),
    [
        (["/opt/venv/bin/python", "/opt/serve_model.py", *SERVE_TAIL], "serve-subcommand",
         ["/opt/venv/bin/python", "/opt/serve_model.py"]),
        (["/opt/bin/serve-model", *SERVE_TAIL], "serve-subcommand", ["/opt/bin/serve-model"]),
        (["python3", "-m", "mycorp.llm", *SERVE_TAIL], "serve-subcommand", ["python3", "-m", "mycorp.llm"]),
        (["sudo", "-u", "vllm", "/v/bin/vllm", *SERVE_TAIL], "vllm", ["sudo", "-u", "vllm"]),
        (["sudo", "-E", "--user=vllm", "NCCL_DEBUG=INFO", "vllm", *SERVE_TAIL], "vllm",
         ["sudo", "-E", "--user=vllm", "NCCL_DEBUG=INFO"]),
        (["runuser", "-u", "vllm", "--", "/opt/venv/bin/python", "/opt/serve_model.py", *SERVE_TAIL],
         "serve-subcommand", ["runuser", "-u", "vllm", "--", "/opt/venv/bin/python", "/opt/serve_model.py"]),
        (["setpriv", "--reuid=vllm", "--regid=vllm", "--init-groups", "vllm", *SERVE_TAIL], "vllm",
         ["setpriv", "--reuid=vllm", "--regid=vllm", "--init-groups"]),
        (["nice", "-n", "-5", "vllm", *SERVE_TAIL], "vllm", ["nice", "-n", "-5"]),
        (["chrt", "-f", "50", "vllm", *SERVE_TAIL], "vllm", ["chrt", "-f", "50"]),
        (["numactl", "--cpunodebind=0", "--membind=0", "vllm", *SERVE_TAIL], "vllm",
         ["numactl", "--cpunodebind=0", "--membind=0"]),
        (["numactl", "-N", "0", "-m", "0", "vllm", *SERVE_TAIL], "vllm", ["numactl", "-N", "0", "-m", "0"]),
        (["taskset", "-c", "0-31", "vllm", *SERVE_TAIL], "vllm", ["taskset", "-c", "0-31"]),
        (["taskset", "0xff", "python", "/opt/x.py", *SERVE_TAIL], "serve-subcommand",
         ["taskset", "0xff", "python", "/opt/x.py"]),
        (["uv", "run", "--project", "/opt/app", "vllm", *SERVE_TAIL], "vllm", ["uv", "run", "--project", "/opt/app"]),
        (["uvx", "--from", "vllm==0.20.1", "vllm", *SERVE_TAIL], "vllm", ["uvx", "--from", "vllm==0.20.1"]),
        (["conda", "run", "-n", "vllm", "--no-capture-output", "vllm", *SERVE_TAIL], "vllm",
         ["conda", "run", "-n", "vllm", "--no-capture-output"]),
        (["/usr/bin/env", "A=B", "python", "-m", "vllm.entrypoints.cli.main", *SERVE_TAIL], "vllm", []),
        (["nice", "-n", "5", "chrt", "-f", "50", "numactl", "--cpunodebind=0", "taskset", "-c", "0-7",
          "uv", "run", "vllm", *SERVE_TAIL], "vllm",
         ["nice", "-n", "5", "chrt", "-f", "50", "numactl", "--cpunodebind=0", "taskset", "-c", "0-7", "uv", "run"]),
    ],
)
def test_launchers_of_any_shape(argv: list[str], entry: str, launcher: list[str]) -> None:
    cmd = parse_vllm_argv(argv)
    assert cmd.wrapper == "vllm-serve"
    assert cmd.model == "/models/x"
    assert cmd.flags == {"tensor-parallel-size": "8", "max-model-len": "8192"}
    assert (cmd.entry, cmd.launcher) == (entry, launcher)
    assert cmd.notes == []


def test_wrapped_module_and_shell_scripts() -> None:
    cmd = parse_vllm_argv(["conda", "run", "-n", "v", "python", "-m", "vllm.entrypoints.openai.api_server",
                           "--model", "/m", "-tp", "2"])
    assert (cmd.wrapper, cmd.entry, cmd.model, cmd.flags) == ("api-server-module", "module", "/m",
                                                              {"tensor-parallel-size": "2"})
    for argv in (["su", "vllm", "-c", "exec vllm serve /m -tp 4"],
                 ["runuser", "-l", "vllm", "-c", "vllm serve /m -tp 4"],
                 ["sudo", "-u", "vllm", "bash", "-c", "source /opt/env; vllm serve /m -tp 4"]):
        cmd = parse_vllm_argv(argv)
        assert (cmd.wrapper, cmd.model, cmd.flags) == ("bash", "/m", {"tensor-parallel-size": "4"}), argv


@pytest.mark.parametrize(
    "argv",
    [
        ["bentoml", "serve", "service:svc", "--port", "3000"],  # a serve subcommand with no vLLM-only flag
        ["python", "app.py", "serve", "x", "--host", "0.0.0.0", "--port", "80"],
        ["sudo", "-u", "x", "/usr/bin/sleep", "100"],
        ["uv", "sync"],
        ["ollama", "serve"],
    ],
)
def test_other_serve_commands_are_not_vllm(argv: list[str]) -> None:
    assert parse_vllm_argv(argv).wrapper == "unknown"


def test_is_wrapped() -> None:
    assert not is_wrapped(parse_vllm_argv(["vllm", *SERVE_TAIL]))
    assert not is_wrapped(parse_vllm_argv(["python", "/opt/serve_model.py", *SERVE_TAIL]))
    assert is_wrapped(parse_vllm_argv(["sudo", "-u", "v", "vllm", *SERVE_TAIL]))
    assert is_wrapped(parse_vllm_argv(["/opt/mywrapper", "--x", "vllm", *SERVE_TAIL]))  # may stay as the parent
