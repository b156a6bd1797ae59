"""A settings change against a real systemd 252: inferbot's drop-in, written through the real remote templates
over real SSH with the README's sudoers lines, is loaded by systemd, and the process receives every value byte for
byte (``/proc/<pid>/cmdline`` and ``environ``); the operator's drop-in survives; ``reset-failed`` clears a start
limit. The truth is systemd itself, not inferbot's reading of unit files.
"""

from __future__ import annotations

import asyncio
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from config.models import BotConfig, Service
from services.change import dropin
from services.change.catalogue import table_for
from services.change.plan import Plan, plan_change
from services.change.spec import ChangeSpec, parse_options
from services.node import change as remote
from services.node.ssh import NodePool
from tests.systemd import container as ct
from tests.systemd.conftest import RealNode

UNIT = "change-std.service"
LIMITED = "change-limit.service"
OPERATOR_DROPIN = f"/etc/systemd/system/{UNIT}.d/10-operator.conf"
DROPIN = f"/etc/systemd/system/{UNIT}.d/90-inferbot.conf"
# Values that a naive quoter gets wrong: spaces, both quotes, %, $, ${X}, backslashes, nested JSON, a lone ;.
HARD_VALUES = {
    "chat-template": 'it\'s "quoted" 100% $HOME ${PORT} back\\slash \\n tab\tend',
    "hf-overrides": '{"rope_scaling": {"type": "yarn", "note": "50% of $X, ${Y} and \\"q\\""}}',
    "speculative-config": '{"method":"ngram","num_speculative_tokens":4,"x":{"y":[1,"a b"]}}',
    "served-model-name": ";",
}
OPERATOR_TEXT = "[Service]\nEnvironment=OPERATOR=kept \"SPACED=x y\"\n"
HARD_ENV = {"WEIRD": 'a  b "c" \'d\' 100% $X ${Y} \\back', "EMPTYISH": " "}


def sudoers(unit: str, path: str) -> str:
    """The README's sudoers lines for inferbot's drop-in of ``unit`` (as narrow as they can be)."""
    return (
        f"inferbot ALL=(root) NOPASSWD: /usr/bin/install -D -m 0644 /dev/stdin {path}.new\n"
        f"inferbot ALL=(root) NOPASSWD: /usr/bin/mv -f -- {path}.new {path}\n"
        f"inferbot ALL=(root) NOPASSWD: /usr/bin/rm -f -- {path}\n"
        f"inferbot ALL=(root) NOPASSWD: /usr/bin/systemctl reset-failed -- {unit}\n"
        "inferbot ALL=(root) NOPASSWD: /usr/bin/systemctl daemon-reload\n"
    )


@pytest.fixture(scope="module")
def change_node(real_node: RealNode) -> Iterator[tuple[RealNode, int]]:
    """Two more units in the booted container: one to change (with an operator drop-in), one with a start limit."""
    c = real_node.container
    port = ct.free_port()
    sysd = c.path("/etc/systemd/system")
    (sysd / UNIT).write_text(
        "[Unit]\nDescription=changed by inferbot\n\n[Service]\nEnvironment=NCCL_ALGO=Ring PORT=" + str(port) + "\n"
        "ExecStart=/usr/local/bin/vllm serve /models/change --port ${PORT} --max-num-seqs 64 --enforce-eager\n"
        "Restart=on-failure\n")
    (sysd / f"{UNIT}.d").mkdir(exist_ok=True)
    c.path(OPERATOR_DROPIN).write_text(OPERATOR_TEXT)
    (sysd / LIMITED).write_text("[Unit]\nDescription=fails fast\nStartLimitIntervalSec=600\nStartLimitBurst=2\n\n"
                                "[Service]\nExecStart=/bin/sh -c 'test ! -e /run/change-limit.fail && exec sleep 600'\n"
                                "Restart=on-failure\nRestartSec=100ms\n")
    lines = sudoers(UNIT, DROPIN) + sudoers(LIMITED, f"/etc/systemd/system/{LIMITED}.d/90-inferbot.conf")
    c.path("/etc/sudoers.d/inferbot-change").write_text(lines)
    c.run("chmod", "0440", "/etc/sudoers.d/inferbot-change")
    assert c.run("visudo", "-c", check=False).returncode == 0
    c.run("systemctl", "daemon-reload")
    c.run("systemctl", "start", UNIT)
    c.wait_active([UNIT])
    c.wait_listening([port])
    yield real_node, port
    c.run("systemctl", "stop", UNIT, LIMITED, check=False)


def config(node: RealNode, tmp_path: Path) -> BotConfig:
    data = node.config(tmp_path).model_dump()
    data["services"] = [{"name": "change-std", "node": "real", "unit": UNIT, "changes": {"enabled": True}},
                        {"name": "change-limit", "node": "real", "unit": LIMITED, "changes": {"enabled": True}}]
    return BotConfig.model_validate(data)


def main_pid(node: RealNode, unit: str = UNIT) -> str:
    return node.container.run("systemctl", "show", "-p", "MainPID", "--value", unit).stdout.strip()


def result(node: RealNode, unit: str) -> str:
    return node.container.run("systemctl", "show", "-p", "Result", "--value", unit).stdout.strip()


def argv_of(node: RealNode) -> list[str]:
    return node.container.run("cat", f"/proc/{main_pid(node)}/cmdline").stdout.split("\0")[:-1]


def environ_of(node: RealNode) -> dict[str, str]:
    raw = node.container.run("cat", f"/proc/{main_pid(node)}/environ").stdout.split("\0")
    return dict(e.partition("=")[::2] for e in raw if e)


async def change(pool: NodePool, cfg: BotConfig, service: Service, spec: ChangeSpec, change_id: str) -> Plan:
    """Plan from what the node says, write (or remove) the drop-in, reload systemd."""
    node = cfg.nodes[0]
    read = await remote.read_unit(pool, node, service)
    plan = plan_change(read.source, spec, table_for("0.20.1")[0], change_id)
    assert isinstance(plan, Plan), plan
    if plan.dropin_text is not None:
        step = await remote.write_dropin(pool, node, service, plan.dropin_text)
    else:
        step = await remote.remove_dropin(pool, node, service)
    assert step.ok, step.summary()
    assert (await remote.daemon_reload(pool, node, cfg.access)).ok
    return plan


def restart(node: RealNode, unit: str = UNIT) -> None:
    node.container.run("systemctl", "restart", unit)
    node.container.wait_active([unit])


def hard_spec() -> ChangeSpec:
    spec = parse_options([f"{k}={v}" if k != "served-model-name" else f"{k}={shlex.quote(v)}"
                          for k, v in HARD_VALUES.items()] + ["no-enforce-eager"],
                         [], [f"{k}={v}" for k, v in HARD_ENV.items()], ["NCCL_ALGO"])
    assert isinstance(spec, ChangeSpec), spec
    return spec


def check_process(node: RealNode) -> list[str]:
    """What differs between what was asked and what the process got (empty: byte for byte)."""
    argv, env = argv_of(node), environ_of(node)
    wrong = [f"--{k}: {argv[argv.index('--' + k) + 1]!r}" for k, v in HARD_VALUES.items()
             if f"--{k}" not in argv or argv[argv.index(f"--{k}") + 1] != v]
    wrong += [f"{k}: {env.get(k)!r}" for k, v in HARD_ENV.items() if env.get(k) != v]
    if "--no-enforce-eager" not in argv or "--enforce-eager" in argv:
        wrong.append("enforce-eager")
    if "NCCL_ALGO" in env:
        wrong.append("NCCL_ALGO still set")
    return wrong


async def test_values_reach_the_process_byte_for_byte(change_node: tuple[RealNode, int], tmp_path: Path) -> None:
    node, port = change_node
    cfg = config(node, tmp_path)
    service = cfg.services[0]
    operator_argv = argv_of(node)
    pool = NodePool()
    try:
        await change(pool, cfg, service, hard_spec(), "#1")
        restart(node)
        assert check_process(node) == []
        env = environ_of(node)
        assert env["OPERATOR"] == "kept" and env["SPACED"] == "x y"  # the operator's drop-in still applies
        assert argv_of(node)[argv_of(node).index("--port") + 1] == str(port)  # ${PORT} of the operator's line
        # The operator's files are untouched; systemd lists both drop-ins.
        assert node.container.path(OPERATOR_DROPIN).read_text() == OPERATOR_TEXT
        paths = node.container.run("systemctl", "show", "-p", "DropInPaths", "--value", UNIT).stdout.split()
        assert paths == [OPERATOR_DROPIN, DROPIN]
        # Removing inferbot's drop-in gives the operator's settings back, its own drop-in still there.
        assert (await remote.remove_dropin(pool, cfg.nodes[0], service)).ok
        assert (await remote.daemon_reload(pool, cfg.nodes[0], cfg.access)).ok
        restart(node)
        assert argv_of(node) == operator_argv
        assert environ_of(node)["OPERATOR"] == "kept" and environ_of(node)["NCCL_ALGO"] == "Ring"
        assert node.container.path(OPERATOR_DROPIN).exists()
    finally:
        await pool.close()


async def test_a_naive_quoter_would_have_been_caught(change_node: tuple[RealNode, int], tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The byte-for-byte check can fail: with shell-style quoting (no %%, no $$, $$ in Environment=) it does."""
    node, _ = change_node
    cfg = config(node, tmp_path)
    monkeypatch.setattr(dropin, "exec_word", lambda v: v if v.isalnum() else shlex.quote(v).replace("%", "%%"))
    monkeypatch.setattr(dropin, "environment_item",
                        lambda k, v: '"' + f"{k}={v}".replace("\\", "\\\\").replace('"', '\\"').replace("$", "$$")
                        .replace("%", "%%") + '"')
    pool = NodePool()
    try:
        await change(pool, cfg, cfg.services[0], hard_spec(), "#3")
        restart(node)
        wrong = check_process(node)
        assert any(w.startswith("--chat-template") for w in wrong), wrong  # systemd decodes C escapes in '…' too
        assert any(w.startswith("WEIRD") for w in wrong), wrong  # $$ in Environment= reaches the process as $$
    finally:
        assert (await remote.remove_dropin(pool, cfg.nodes[0], cfg.services[0])).ok
        assert (await remote.daemon_reload(pool, cfg.nodes[0], cfg.access)).ok
        restart(node)
        await pool.close()


async def test_reset_failed_clears_a_start_limit(change_node: tuple[RealNode, int], tmp_path: Path) -> None:
    node, _ = change_node
    c = node.container
    cfg = config(node, tmp_path)
    c.run("touch", "/run/change-limit.fail")
    c.run("systemctl", "start", LIMITED, check=False)  # it fails, systemd restarts it until the start limit
    for _ in range(100):
        if "repeated too quickly" in c.run("journalctl", "-u", LIMITED, "--no-pager", check=False).stdout:
            break
        await asyncio.sleep(0.1)
    c.run("rm", "/run/change-limit.fail")  # it would start now, but systemd refuses to try
    c.run("systemctl", "start", LIMITED, check=False)
    assert c.run("systemctl", "is-active", LIMITED, check=False).stdout.strip() == "failed"
    pool = NodePool()
    try:
        step = await remote.reset_failed(pool, cfg.nodes[0], cfg.services[1])
        assert step.ok, step.summary()
    finally:
        await pool.close()
    assert result(node, LIMITED) == "success"
    c.run("systemctl", "start", LIMITED)  # accepted again
    assert c.run("systemctl", "is-active", LIMITED, check=False).stdout.strip() == "active"
    c.run("systemctl", "stop", LIMITED, check=False)


async def test_the_sudoers_lines_allow_nothing_else(change_node: tuple[RealNode, int]) -> None:
    """The operator's unit and drop-ins cannot be written or removed through inferbot's sudo rules."""
    node, _ = change_node
    c = node.container
    for argv in (["rm", "-f", "--", OPERATOR_DROPIN], ["rm", "-f", "--", f"/etc/systemd/system/{UNIT}"],
                 ["install", "-D", "-m", "0644", "/dev/stdin", OPERATOR_DROPIN],
                 ["mv", "-f", "--", f"{DROPIN}.new", OPERATOR_DROPIN]):
        r = c.run("su", "-s", "/bin/sh", ct.LOGIN_USER, "-c", "sudo -n " + shlex.join(argv) + " </dev/null",
                  check=False)
        assert r.returncode != 0 and "password is required" in r.stderr, (argv, r.stderr)
    assert c.path(OPERATOR_DROPIN).exists() and c.path(f"/etc/systemd/system/{UNIT}").exists()
