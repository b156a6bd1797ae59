"""services/parse/docker_run.py: ``docker run`` read as the docker CLI reads it.

The truth is the docker CLI itself (where it is installed): pointed at a stand-in daemon on a Unix socket,
it sends the container it would create (``POST /containers/create``: image, entrypoint, command,
environment) and the stand-in records it. The parser's reading of the same command line must agree.
"""

from __future__ import annotations

import http.server
import json
import os
import shutil
import socketserver
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.parse.docker_run import docker_run

DOCKER = shutil.which("docker")

# The command of vLLM's "Deploying with Docker" page, and forms a unit file writes.
CASES = [
    ["docker", "run", "--runtime", "nvidia", "--gpus", "all", "-v", "/srv/hf:/root/.cache/huggingface",
     "--env", "HUGGING_FACE_HUB_TOKEN=<secret>", "-p", "8000:8000", "--ipc=host", "vllm/vllm-openai:latest",
     "--model", "mistralai/Mistral-7B-v0.1"],
    ["docker", "run", "--rm", "-i", "--name", "vllm-kimi", "-e", "NCCL_DEBUG=INFO", "-e=A=1", "-eB=2",
     "--shm-size", "16g", "-p8000:8000", "--entrypoint", "python3", "registry/vllm:0.20",
     "-m", "vllm.entrypoints.openai.api_server", "--model", "/models/k"],
    ["docker", "container", "run", "--init", "--read-only", "--network=host", "-w", "/srv", "-u", "1000",
     "--", "img:1", "vllm", "serve", "/m"],
    ["docker", "run", "-d", "--privileged", "--env", "EMPTY=", "--label", "a=b", "img", "serve"],
]


class _Daemon(http.server.BaseHTTPRequestHandler):
    """Answers the CLI's ping and records the container it asks to create (then refuses, so nothing runs)."""

    protocol_version = "HTTP/1.1"
    created: list[dict[str, Any]]

    def address_string(self) -> str:
        return "unix"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _answer(self, code: int, body: object | None) -> None:
        data = json.dumps(body).encode() if body is not None else b""
        self.send_response(code)
        self.send_header("Api-Version", "1.45")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def do_HEAD(self) -> None:
        self._answer(200, None)

    def do_GET(self) -> None:
        self._answer(200, "OK") if self.path.endswith("/_ping") else self._answer(404, {"message": "no"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if "/containers/create" in self.path:
            type(self).created.append(json.loads(body))
        self._answer(500, {"message": "recorded, not created"})


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    if DOCKER is None:
        pytest.skip("the docker CLI is not installed (the truth of these cases)")
    socket_path = str(tmp_path / "docker.sock")
    created: list[dict[str, Any]] = []
    handler = type("Daemon", (_Daemon,), {"created": created})
    server = _Server(socket_path, handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield socket_path, created
    finally:
        server.shutdown()
        server.server_close()


def _created_by_docker(argv: list[str], socket_path: str, created: list[dict[str, Any]], home: Path,
                       env: dict[str, str]) -> dict[str, Any]:
    assert DOCKER is not None
    environ = {"PATH": os.environ["PATH"], "HOME": str(home), "DOCKER_HOST": f"unix://{socket_path}", **env}
    subprocess.run([DOCKER, *argv[1:]], env=environ, capture_output=True, timeout=60, stdin=subprocess.DEVNULL)
    assert len(created) == 1, "the docker CLI did not ask to create the container"
    return created.pop()


@pytest.mark.parametrize("argv", CASES, ids=[" ".join(c[:4]) for c in CASES])
def test_what_the_docker_cli_would_create(argv: list[str], daemon: tuple[str, list[dict[str, Any]]],
                                          tmp_path: Path) -> None:
    socket_path, created = daemon
    truth = _created_by_docker(argv, socket_path, created, tmp_path, {})
    run = docker_run(argv)
    assert run is not None
    assert run.image == truth["Image"]
    assert run.command == (truth["Cmd"] or [])
    assert ([run.entrypoint] if run.entrypoint is not None else None) == truth["Entrypoint"]
    assert sorted(f"{k}={v}" for k, v in run.env.items()) == sorted(truth["Env"] or [])  # (docker's order varies)


def test_a_bare_e_copies_the_hosts_variable(daemon: tuple[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    socket_path, created = daemon
    argv = ["docker", "run", "-e", "HF_TOKEN", "--env", "NCCL_DEBUG=INFO", "img", "serve"]
    run = docker_run(argv)
    assert run is not None and run.host_env == ["HF_TOKEN"]
    # The value comes from the environment docker runs in, never from the command line.
    assert sorted(_created_by_docker(argv, socket_path, created, tmp_path, {"HF_TOKEN": "t"})["Env"]) == [
        "HF_TOKEN=t", "NCCL_DEBUG=INFO"]
    assert sorted(_created_by_docker(argv, socket_path, created, tmp_path, {})["Env"]) == [
        "HF_TOKEN", "NCCL_DEBUG=INFO"]


def test_env_files_are_named_not_read() -> None:
    run = docker_run(["podman", "run", "--env-file", "/etc/vllm.env", "--env-file=/etc/more.env", "img"])
    assert run is not None and run.env_files == ["/etc/vllm.env", "/etc/more.env"] and run.command == []


@pytest.mark.parametrize("argv", [["docker", "ps"], ["docker", "compose", "up"], ["vllm", "serve"], []])
def test_not_a_run(argv: list[str]) -> None:
    assert docker_run(argv) is None


def test_options_to_the_end_name_no_image() -> None:
    run = docker_run(["/usr/bin/docker", "run", "--rm", "-p", "8000:8000"])
    assert run is not None and run.image is None and run.command == []
