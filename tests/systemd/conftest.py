"""The real-systemd tier: one throwaway Debian 12 container per session, every test unit installed at once.

Skips with one line when this machine cannot boot it (not root, no systemd-nspawn/debootstrap); under CI
(``CI`` set, as in .ci/run) a missing requirement fails instead, so the tier cannot silently vanish.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from config.models import BotConfig
from tests.samples.secrets import systemd_corpus as corpus
from tests.sshd import ClientKey
from tests.systemd import container as ct

STANDIN = Path(__file__).with_name("standin_vllm.py")
_WHY_NOT = ct.missing_requirements()
if _WHY_NOT is not None and not os.environ.get("CI"):
    collect_ignore_glob = ["test_*.py"]  # one summary line below instead of a skip per test


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say once that the tier did not run, and what it needs."""
    if _WHY_NOT is not None and not os.environ.get("CI"):
        terminalreporter.write_line(f"real-systemd tier skipped: it {_WHY_NOT}")
# Unit name -> service name the bot is configured with.
UNITS = {
    "vllm-std.service": "std",
    "serve-model.service": "serve-model",
    "wrapper.service": "wrapper",
    "sudo-vllm.service": "sudo-vllm",
    "quoting.service": "quoting",
    "json-flags.service": "json-flags",
    "drift.service": "drift",
    "corpus.service": "corpus",
    "syntax.service": "syntax",
}
# More launcher shapes: service name -> ExecStart ({port} filled in); each serves /models/<name> with
# --max-model-len 3072. Some exec (the server is MainPID), some stay the parent (the server is a child).
LAUNCHERS = {
    "nice": "/usr/bin/nice -n 5 /usr/local/bin/vllm serve /models/nice --port {port} --max-model-len 3072",
    "numactl": "/usr/bin/numactl --interleave=all /opt/venv/bin/python /opt/serve_model.py serve /models/numactl "
               "--port {port} --max-model-len 3072",
    "taskset": "/usr/bin/taskset -c 0 /opt/venv/bin/python /opt/serve_model.py serve /models/taskset --port {port} "
               "--max-model-len 3072",
    "runuser": "/usr/sbin/runuser -u vllm -- /usr/local/bin/vllm serve /models/runuser --port {port} "
               "--max-model-len 3072",
    "setpriv": "/usr/bin/setpriv --reuid=vllm --regid=vllm --clear-groups /usr/local/bin/vllm serve /models/setpriv "
               "--port {port} --max-model-len 3072",
    "module": "/usr/bin/python3 -m vllm.entrypoints.openai.api_server --model /models/module --port {port} "
              "--max-model-len 3072",
    "bash-exec": "/bin/bash -c 'exec /usr/local/bin/vllm serve /models/bash-exec --port {port} --max-model-len 3072'",
    "sh-child": "/bin/sh -c '/usr/local/bin/vllm serve /models/sh-child --port {port} --max-model-len 3072; exit 1'",
}
UNITS.update({f"launch-{name}.service": name for name in LAUNCHERS})
FAILING_UNIT = "corpus-fail.service"  # not in UNITS: it is meant to fail
# Unit-file syntax corner cases; what systemd made of them is recorded in tests/samples/units/real-systemd.json.
SYNTAX_ENV_FILE = (
    "# comment\n; comment too\nA_PLAIN=plain value   \nA_SQ='single # not a comment'\n"
    'A_DQ="dq \\"esc\\" \\$x \\n"\nA_CONT=one\\\ntwo\nexport A_EXPORT=ignored\nA_MID=x"y"z\n'
    " A_LEADING = spaced\nNOEQUALS\nA_LIST=x y\n")


def syntax_unit(port: int) -> str:
    """A unit full of quoting, escapes, specifiers and ``$`` expansion (its own port)."""
    return (
        "[Unit]\nDescription=syntax corner cases\n\n[Service]\n"
        f'Environment=PORT={port} "SPACED=a  b" EMPTY=\n'
        "Environment='QUOTED=it is' UNIT=%n\n"
        "EnvironmentFile=/etc/inferbot/syntax.env\n"
        "EnvironmentFile=-/etc/inferbot/absent.env\n"
        "ExecStart=@/usr/bin/python3 standin-renamed /usr/local/lib/standin_vllm.py serve /models/syntax-%N \\\n"
        "  --port ${PORT} --served-model-name '%p' --tokenizer \"a\\x41b\" --chat-template 'it''s' \\\n"
        "# a comment inside the continuation\n"
        "  --revision pre\"mid dle\"post --code-revision $$literal --hf-overrides '{\"k\": \"100%%\"}' \\\n"
        "  --seed ${UNSET:-5} $A_LIST --download-dir ${SPACED} $EMPTY --tokenizer-mode=${A_PLAIN} \\\n"
        "  --quantization=fp8 tab\\tsep $NOT_SET_AT_ALL\n"
        "\n[Install]\nWantedBy=multi-user.target\n")
JSON_COMPILATION = '{"cudagraph_mode":"FULL_AND_PIECEWISE","max_cudagraph_capture_size":256}'
JSON_KV = '{"kv_connector_extra_config":{"api_key":{"v":"SECRETkvNested991"}}}'
JSON_LOADER = '{"token": 12345678901}'


@dataclass
class RealNode:
    """The booted container and the ports of its stand-in servers."""

    container: ct.Container
    ports: dict[str, int]
    key: ClientKey
    known_hosts: Path

    @property
    def template_unit(self) -> str:
        """The instance of the ``vllm@.service`` template (the instance is its port)."""
        return f"vllm@{self.ports['tmpl']}.service"

    def config(self, state_dir: Path, **extra: Any) -> BotConfig:
        """A bot config with one node (the container) and a service per test unit."""
        services = [{"name": s, "node": "real", "unit": u} for u, s in UNITS.items()]
        services.append({"name": "tmpl", "node": "real", "unit": self.template_unit})
        services.append({"name": "corpus-fail", "node": "real", "unit": FAILING_UNIT})
        return BotConfig.model_validate({
            "nodes": [{"name": "real", "host": "127.0.0.1", "port": self.container.ssh_port, "user": ct.LOGIN_USER,
                       "key_file": str(self.key.private), "known_hosts": str(self.known_hosts), "timeout": 15}],
            "services": services,
            "state": {"dir": str(state_dir)},
            **extra,
        })


def _unit(description: str, service: list[str]) -> str:
    body = "\n".join(service)
    return (f"[Unit]\nDescription={description}\n\n[Service]\n{body}\nRestart=on-failure\n\n"
            "[Install]\nWantedBy=multi-user.target\n")


def _corpus_unit(port: int) -> str:
    env_lines = [f'Environment="{s.text}"' for s in corpus.by_where("environment")]
    flags = " ".join(s.text for s in corpus.by_where("flag"))
    return _unit("corpus of secret shapes", [
        *env_lines,
        "Environment=STANDIN_LOG_LINES=/etc/inferbot/corpus-journal.txt",
        "EnvironmentFile=/etc/inferbot/corpus.env",
        f"ExecStart=/usr/local/bin/vllm serve /models/corpus --port {port} {flags}",
    ])


def _install_standin(root: Path, ports: dict[str, int]) -> None:
    """The stand-in vLLM server under every name and launcher the tests reach it by."""
    lib = root / "usr/local/lib/standin_vllm.py"
    shutil.copy(STANDIN, lib)
    text = STANDIN.read_text()
    # The same server under any name: a console script, a launcher script of another name.
    (root / "usr/local/bin/vllm").write_text(text.replace("#!/usr/bin/python3", "#!/opt/venv/bin/python", 1))
    (root / "opt/serve_model.py").write_text(text)
    for p in ("usr/local/bin/vllm", "opt/serve_model.py", "usr/local/lib/standin_vllm.py"):
        os.chmod(root / p, 0o755)
    # A wrapper that does not exec: the server is its child, the shell stays the unit's MainPID.
    launch = root / "opt/launch.sh"
    launch.write_text(
        "#!/bin/sh\n"
        f"/opt/venv/bin/python /opt/serve_model.py serve /models/wrapped --port {ports['wrapper']} "
        "--tensor-parallel-size 4 --max-model-len 16384\n"
        'rc=$?\necho "server exited with $rc"\nexit $rc\n')
    os.chmod(launch, 0o755)
    # `python -m vllm.entrypoints.openai.api_server` finds the stand-in as that module.
    pkg = root / "usr/local/lib/python3.11/dist-packages/vllm/entrypoints/openai"
    pkg.mkdir(parents=True)
    for d in (pkg, pkg.parent, pkg.parent.parent):
        (d / "__init__.py").write_text("")
    (pkg / "api_server.py").write_text(text)


def _write_env_files(root: Path) -> None:
    """The environment files and the secret-bearing journal lines the units read."""
    etc = root / "etc/inferbot"
    (etc / "quoting.env").write_text(
        "# comment\n; also a comment\nEXTRA_ARGS=--seed 7 --max-num-seqs 64\nQUOTED_SINGLE='x y'\n"
        'QUOTED_DOUBLE="say \\"hi\\""\n')
    (etc / "syntax.env").write_text(SYNTAX_ENV_FILE)
    (etc / "corpus.env").write_text("\n".join(s.text for s in corpus.by_where("env-file")) + "\n")
    os.chmod(etc / "corpus.env", 0o600)
    # Its own unit's secrets only: a value seen in another unit is not this unit's to know.
    (etc / "corpus-fail.txt").write_text("\n".join(
        s.text.split("] ", 1)[-1] for s in corpus.by_where("journal") if s.name != corpus.CROSS_UNIT) + "\n")
    os.chmod(etc / "corpus-fail.txt", 0o600)
    (etc / "corpus-journal.txt").write_text("\n".join(s.text for s in corpus.by_where("journal")) + "\n")
    os.chmod(etc / "corpus-journal.txt", 0o600)


def _units(ports: dict[str, int]) -> dict[str, str]:
    """Every test unit's file, by its name."""
    return {
        "vllm-std.service": _unit("vLLM standard", [
            "Environment=CUDA_VISIBLE_DEVICES=0,1 NCCL_ALGO=Ring",
            f"ExecStart=/usr/local/bin/vllm serve /models/std --port {ports['std']} --tensor-parallel-size 2 "
            "--max-model-len 8192 --gpu-memory-utilization 0.9",
        ]),
        "serve-model.service": _unit("launcher of another name", [
            "Environment=NCCL_ALGO=Tree",
            f"ExecStart=/opt/venv/bin/python /opt/serve_model.py serve /models/x --tensor-parallel-size 8 "
            f"--port {ports['serve-model']} --max-model-len 32768",
        ]),
        "wrapper.service": _unit("wrapper without exec", ["ExecStart=/bin/sh -c '/opt/launch.sh'"]),
        "sudo-vllm.service": _unit("sudo -u vllm", [
            f"ExecStart=/usr/bin/sudo -u vllm /opt/venv/bin/python /opt/serve_model.py serve /models/sudo "
            f"--port {ports['sudo-vllm']} --pipeline-parallel-size 2 --max-model-len 2048",
        ]),
        "quoting.service": _unit("systemd quoting", [
            f'Environment="GREETING=hello world" MODEL_DIR=/models/quoted PORT={ports["quoting"]}',
            "Environment='SINGLE=a b'",
            "EnvironmentFile=/etc/inferbot/quoting.env",
            "EnvironmentFile=-/etc/inferbot/missing.env",
            "ExecStart=/usr/local/bin/vllm serve ${MODEL_DIR} --port $PORT --served-model-name \"quoted name\" \\\n"
            "  --chat-template-content-format \"str\\\"ing\" $EXTRA_ARGS --max-model-len=4096",
        ]),
        "vllm@.service": (
            "[Unit]\nDescription=vLLM on port %i\n\n[Service]\nEnvironment=INSTANCE=%i\n"
            "ExecStart=/usr/local/bin/vllm serve /models/tmpl-%i --port %i --served-model-name tmpl-%i\n\n"
            "[Install]\nWantedBy=multi-user.target\n"),
        "json-flags.service": _unit("JSON flags", [
            f"ExecStart=/usr/local/bin/vllm serve /models/json --port {ports['json-flags']} "
            f"--compilation-config='{JSON_COMPILATION}' --kv-transfer-config '{JSON_KV}' "
            f"--model-loader-extra-config '{JSON_LOADER}'",
        ]),
        "drift.service": _unit("edited without daemon-reload", [
            f"ExecStart=/usr/local/bin/vllm serve /models/drift --port {ports['drift']} --max-model-len 1024",
        ]),
        "corpus.service": _corpus_unit(ports["corpus"]),
        "syntax.service": syntax_unit(ports["syntax"]),
        FAILING_UNIT: (
            "[Unit]\nDescription=fails at startup with secrets in its error lines\n\n[Service]\n"
            "Environment=STANDIN_FAIL_FILE=/etc/inferbot/corpus-fail.txt\n"
            f"ExecStart=/usr/local/bin/vllm serve /models/corpus-fail --port {ports['corpus-fail']} "
            f"{' '.join(s.text for s in corpus.by_where('flag'))}\n"
            "Restart=no\n\n[Install]\nWantedBy=multi-user.target\n"),
        **{f"launch-{n}.service": _unit(f"launcher {n}", [f"ExecStart={cmd.format(port=ports[n])}"])
           for n, cmd in LAUNCHERS.items()},
    }


def _install_units(root: Path, ports: dict[str, int]) -> None:
    """Write the units and enable each (the template through one instance)."""
    units = _units(ports)
    sysd = root / "etc/systemd/system"
    wants = sysd / "multi-user.target.wants"
    wants.mkdir(exist_ok=True)
    for name, text in units.items():
        (sysd / name).write_text(text)
        if "@." not in name:
            (wants / name).symlink_to(f"../{name}")
    (wants / f"vllm@{ports['tmpl']}.service").symlink_to("../vllm@.service")


def _prepare(ports: dict[str, int]) -> Callable[[Path], None]:
    def prepare(root: Path) -> None:
        _install_standin(root, ports)
        _write_env_files(root)
        _install_units(root, ports)

    return prepare


@pytest.fixture(scope="session")
def real_node() -> Iterator[RealNode]:
    """The booted container with every test unit active, reachable over real SSH as an unprivileged user."""
    why = ct.missing_requirements()
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"real-systemd tier {why}", pytrace=False)
        pytest.skip(f"real-systemd tier {why}")
    d = Path(tempfile.mkdtemp(prefix="inferbot-real-"))
    key = ClientKey(d)
    ports = {name: ct.free_port() for name in (*UNITS.values(), "tmpl", "corpus-fail")}
    with ct.booted(key.public.read_text(), _prepare(ports)) as c:
        known_hosts = d / "known_hosts"
        known_hosts.write_text(c.known_hosts_line() + "\n")
        node = RealNode(container=c, ports=ports, key=key, known_hosts=known_hosts)
        c.wait_active([*UNITS, node.template_unit])
        c.wait_listening([p for n, p in ports.items() if n != "corpus-fail"])
        c.wait_state(FAILING_UNIT, "failed")
        print(f"\nreal-systemd tier: rootfs build {c.build_seconds:.1f} s, boot {c.boot_seconds:.1f} s")
        yield node
    shutil.rmtree(d, ignore_errors=True)
