"""Each step of the preflight, on its own (the whole preflight over SSH is in tests/test_change_sim.py)."""

from __future__ import annotations

import base64

from config.models import Service
from services.change import preflight as pf
from services.change.catalogue import table_for
from services.change.plan import Plan, UnitSource, plan_change
from services.change.spec import ChangeSpec, parse_text
from services.node.change import listening_ports, parse_read

UNIT = "vllm-kimi.service"
CAT = (f"# /etc/systemd/system/{UNIT}\n[Service]\nEnvironment=CUDA_VISIBLE_DEVICES=0,1,2,3\n"
       "ExecStart=/opt/v/bin/vllm serve /m --tensor-parallel-size 4 --port 8000\n")


def service(**changes: object) -> Service:
    return Service.model_validate({"name": "kimi", "node": "gpu-a", "unit": UNIT, "changes": changes})


def spec(verb: str, text: str) -> ChangeSpec:
    got = parse_text(verb, text)  # type: ignore[arg-type]
    assert isinstance(got, ChangeSpec), got
    return got


def plan(s: ChangeSpec, cat: str = CAT) -> Plan:
    got = plan_change(UnitSource(unit=UNIT, cat=cat, dropin_path=f"/etc/systemd/system/{UNIT}.d/90-inferbot.conf"),
                      s, table_for("0.20.1")[0], "#1")
    assert isinstance(got, Plan), got
    return got


def test_allowed() -> None:
    s = spec("set", "max-num-seqs 8 env NCCL_PROTO=Simple")
    off = pf.check_allowed(service(), s)
    assert off.status == "failed" and "enabled = true" in off.detail
    assert pf.check_allowed(service(enabled=True), s).status == "ok"
    deny = pf.check_allowed(service(enabled=True, deny_flags=["max-*"]), s)
    assert deny.status == "failed" and "--max-num-seqs" in deny.detail
    only = pf.check_allowed(service(enabled=True, allow_flags=["max-num-seqs"], allow_env=["CUDA_*"]), s)
    assert only.status == "failed" and "NCCL_PROTO" in only.detail and "--max-num-seqs" not in only.detail


def test_secrets_are_refused_but_may_be_removed() -> None:
    for text in ("--api-key sk-abc", "--hf-token hf_abcdefghijklmnopqrstuvwxyz012345", "env HF_TOKEN=x",
                 "env MY_SETTING=hf_abcdefghijklmnopqrstuvwxyz012345",
                 "--kv-transfer-config '{\"kv_connector_extra_config\": {\"api_key\": \"s3cr3t-value\"}}'",
                 "--otlp-traces-endpoint https://user:hunter2pass@collector:4317"):
        step = pf.check_secrets(spec("set", text))
        assert step.status == "failed" and step.detail.startswith("set secrets on the node, not in chat"), text
        assert "hunter2pass" not in step.detail and "s3cr3t" not in step.detail and "sk-abc" not in step.detail
    assert pf.check_secrets(spec("unset", "--api-key env HF_TOKEN")).status == "ok"
    assert pf.check_secrets(spec("set", "max-num-seqs 8")).status == "ok"


def test_flags_say_which_check_ran() -> None:
    table, note = table_for("0.31.2")
    step = pf.check_flags(spec("set", "max-num-seqs 8"), table, note)
    assert step.status == "ok" and "inferbot's table of vLLM 0.20 flags" in step.detail and "0.31.2" in step.detail
    bad = ChangeSpec(set_flags={"max-num-seqs": "eight"})
    assert "wants an integer" in pf.check_flags(bad, *table_for("0.20.1")).detail
    assert pf.check_flags(spec("set", "env A=1"), *table_for("0.20.1")).status == "skipped"


def test_gpus() -> None:
    too_many = spec("set", "--tensor-parallel-size 8")
    step = pf.check_gpus(plan(too_many), too_many, 8, "gpu-a")
    assert step.status == "failed" and "needs 8 GPUs" in step.detail and "CUDA_VISIBLE_DEVICES=0,1,2,3" in step.detail
    fits = spec("set", "-tp 2 -pp 2")
    assert pf.check_gpus(plan(fits), fits, 8, "gpu-a").status == "ok"
    more = spec("set", "-tp 8 env CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7")
    assert pf.check_gpus(plan(more), more, 8, "gpu-a").status == "ok"
    plain = CAT.replace("Environment=CUDA_VISIBLE_DEVICES=0,1,2,3\n", "")
    assert pf.check_gpus(plan(too_many, plain), too_many, 4, "gpu-a").status == "failed"
    assert pf.check_gpus(plan(too_many, plain), too_many, None, "gpu-a").status == "skipped"
    other = spec("set", "max-num-seqs 8")
    assert pf.check_gpus(plan(other), other, 1, "gpu-a").status == "skipped"


def test_port() -> None:
    before = plan(ChangeSpec()).argv
    moved = plan(spec("set", "--port 9000"))
    assert pf.check_port(moved, before, [22, 9000], "gpu-a").status == "failed"
    assert "port 9000 is already taken on gpu-a" in pf.check_port(moved, before, [9000], "gpu-a").detail
    assert pf.check_port(moved, before, [8000], "gpu-a").status == "ok"  # its own port is freed by the restart
    assert pf.check_port(plan(spec("set", "max-num-seqs 8")), before, [8000], "gpu-a").status == "skipped"


def test_changes() -> None:
    assert pf.check_changes(plan(spec("set", "--port 8000"))).status == "failed"
    step = pf.check_changes(plan(spec("set", "max-num-seqs 8")))
    assert step.status == "ok" and step.detail == "max-num-seqs (unset) → 8"


def test_the_nodes_answer_is_read() -> None:
    def b(t: str) -> str:
        return base64.b64encode(t.encode()).decode()

    tcp = ("  sl  local_address rem_address   st\n   0: 00000000:1F40 00000000:0000 0A 0\n"
           "   1: 0100007F:2328 0100007F:1F40 01 0\n")
    gpus = "0\n1\n2\n"
    out = (f"cat 0 {b(CAT)}\ndropin 1 \nenvfile 0 {b('/etc/vllm/k.env')} {b('A=1')}\n"
           f"envfile 1 {b('/etc/vllm/secret.env')} \ngpus 0 {b(gpus)}\ntcp 0 {b(tcp)}\n")
    read = parse_read(service(enabled=True), out)
    assert read.cat_ok and read.source.cat == CAT and read.source.dropin_text is None
    assert read.source.env_files == {"/etc/vllm/k.env": "A=1", "/etc/vllm/secret.env": None}
    assert read.gpu_count == 3 and read.listening == [8000]
    assert listening_ports(tcp) == [8000]
