"""services/parse/vllm_unwrap.py: the arguments found for vLLM are the ones the vLLM program really gets.

Each command line is started for real (bash, env, nice, timeout, taskset) with a recorder named ``vllm`` in
PATH; the words after its ``serve`` are the truth the parser's ``args`` are held against.
"""

from __future__ import annotations

import pytest

from services.parse.vllm_unwrap import unwrap
from tests.unit.services.parse.conftest import Run

ARGS = ["/models/kimi", "--tensor-parallel-size", "8", "--served-model-name", "kimi", "k2", "-tp", "8"]
LINES = [
    (["vllm", "serve", *ARGS], "vllm", []),
    (["env", "NCCL_DEBUG=INFO", "nice", "-n", "5", "vllm", "serve", *ARGS], "vllm", ["nice", "-n", "5"]),
    (["timeout", "-s", "TERM", "3600", "taskset", "0xff", "vllm", "serve", *ARGS], "vllm", ["timeout", "-s", "TERM",
                                                                                           "3600", "taskset", "0xff"]),
    (["bash", "-c", "cd /tmp && exec vllm serve " + " ".join(ARGS) + " 2>&1"], "vllm", []),
    (["bash", "-ec", "prep=1; env A=1 vllm serve " + " ".join(ARGS)], "vllm", []),
]


@pytest.mark.parametrize(("argv", "entry", "launcher"), LINES, ids=[" ".join(a[:3]) for a, _, _ in LINES])
def test_the_arguments_found_are_the_ones_vllm_gets(argv: list[str], entry: str, launcher: list[str],
                                                    recorded: Run) -> None:
    (started,) = recorded(argv)
    launch = unwrap(argv)
    assert launch.mode == "serve" and launch.entry == entry
    assert started[1] == "serve" and launch.args == started[2:] == ARGS
    assert launch.launcher == launcher
    assert launch.saw_shell is (argv[0] == "bash")


def test_the_api_server_module_and_a_launcher_script() -> None:
    module = unwrap(["/opt/v/bin/python3", "-u", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"])
    assert (module.mode, module.entry, module.args, module.launcher) == ("module", "module", ["--model", "/m"], [])
    script = unwrap(["/opt/v/bin/python3", "/opt/serve_model.py", "serve", "/m", "--tensor-parallel-size", "8"])
    assert (script.mode, script.entry) == ("serve", "serve-subcommand")
    assert script.launcher == ["/opt/v/bin/python3", "/opt/serve_model.py"]


def test_nothing_of_vllm() -> None:
    launch = unwrap(["/usr/bin/python3", "-m", "http.server", "8000"])
    assert launch.mode is None and launch.args == []


def test_a_container_is_read_through_its_image() -> None:
    launch = unwrap(["docker", "run", "--rm", "-e", "HF_TOKEN", "vllm/vllm-openai:v0.20", "--model", "/m"])
    assert launch.mode == "serve" and launch.args == ["--model", "/m"] and launch.saw_docker
    assert launch.docker_image == "vllm/vllm-openai:v0.20" and launch.docker_env == {"HF_TOKEN": ""}
    assert launch.notes == ["Docker copies HF_TOKEN from the host's environment (not shown)."]
