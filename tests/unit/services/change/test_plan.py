"""The plan of a change: direct vLLM units only, the operator's words kept as written, a second change merging,
contradictions with the operator's own files refused, secrets never in what is shown or dumped."""

from __future__ import annotations

import pytest

from services.change.catalogue import table_for
from services.change.plan import Plan, PlanRefused, UnitSource, plan_change, split_cat
from services.change.spec import ChangeSpec, parse_text
from services.sim import systemd_syntax as truth

UNIT = "vllm-kimi.service"
FRAG = f"/etc/systemd/system/{UNIT}"
OURS = f"/etc/systemd/system/{UNIT}.d/90-inferbot.conf"
SECRET = "sk-plan0secret0value0123456789"
KIMI = f"""# {FRAG}
[Unit]
Description=kimi

[Service]
Environment=NCCL_ALGO=Ring "PORT=8000" CUDA_VISIBLE_DEVICES=0,1,2,3
EnvironmentFile=/etc/vllm/kimi.env
ExecStart=/opt/vllm/venv/bin/vllm serve /models/kimi --port ${{PORT}} \\
  --tensor-parallel-size 4 --enforce-eager --api-key {SECRET} --max-num-seqs 64 $EXTRA
"""
ENV_FILE = "HF_TOKEN=hf_plan0token0value0abcdefghijklmnop\nEXTRA=--seed 7 --block-size 16\n"


def source(cat: str = KIMI, ours: str | None = None, env_file: str | None = ENV_FILE) -> UnitSource:
    return UnitSource(unit=UNIT, cat=cat, dropin_path=OURS, dropin_text=ours,
                      env_files={"/etc/vllm/kimi.env": env_file})


def spec(verb: str, text: str) -> ChangeSpec:
    got = parse_text(verb, text)  # type: ignore[arg-type]
    assert isinstance(got, ChangeSpec), got
    return got


def plan(src: UnitSource, s: ChangeSpec, cid: str = "#1") -> Plan:
    got = plan_change(src, s, table_for("0.20.1")[0], cid)
    assert isinstance(got, Plan), got
    return got


def refused(src: UnitSource, s: ChangeSpec) -> str:
    got = plan_change(src, s, table_for("0.20.1")[0], "#1")
    assert isinstance(got, PlanRefused), got
    return got.reason


def process_argv(p: Plan, cat: str = KIMI) -> list[str]:
    """What systemd (the simulator's independent reading) starts with the operator's unit plus the drop-in."""
    exec_line = next(ln for ln in (p.dropin_text or "").splitlines() if ln.startswith("ExecStart=") and ln[10:])
    env = {"PORT": "8000", "EXTRA": "--seed 7 --block-size 16"}
    return truth.expand_argv(truth.command_words(exec_line[len("ExecStart="):], {}), env)


def test_a_flag_is_replaced_in_place_and_the_operator_words_are_kept() -> None:
    p = plan(source(), spec("set", "max-num-seqs 256"))
    assert p.action == "write" and p.form == "vllm serve"
    assert [d.model_dump() for d in p.diff] == [{"kind": "flag", "key": "max-num-seqs", "old": "64", "new": "256"}]
    line = next(ln for ln in (p.dropin_text or "").splitlines() if ln.startswith("ExecStart=/"))
    assert "--port ${PORT}" in line and line.endswith("--max-num-seqs 256 $EXTRA")  # as the operator wrote them
    assert process_argv(p)[-6:] == ["--max-num-seqs", "256", "--seed", "7", "--block-size", "16"]


def test_new_flags_are_appended_and_env_only_changes_leave_exec_start_alone() -> None:
    p = plan(source(), spec("set", "--speculative-config '{\"method\":\"ngram\"}'"))
    assert process_argv(p)[-2:] == ["--speculative-config", '{"method":"ngram"}']
    env_only = plan(source(), spec("set", "env NCCL_PROTO=Simple"))
    assert "ExecStart" not in (env_only.dropin_text or "") and 'Environment="NCCL_PROTO=Simple"' in (
        env_only.dropin_text or "")


def test_booleans_and_unset() -> None:
    off = plan(source(), spec("set", "--no-enforce-eager"))
    argv = process_argv(off)
    assert "--no-enforce-eager" in argv and "--enforce-eager" not in argv
    gone = plan(source(), spec("unset", "--enforce-eager"))
    assert "--enforce-eager" not in process_argv(gone)
    assert [d.key for d in gone.diff] == ["enforce-eager"] and gone.diff[0].old is True and gone.diff[0].new is None


@pytest.mark.parametrize("exec_start", [
    "/opt/venv/bin/python3 -m vllm.entrypoints.openai.api_server --model /m --max-num-seqs 64",
    "/usr/bin/python3 -u -m vllm.entrypoints.cli.main serve /m --max-num-seqs 64",
    "-/opt/venv/bin/vllm serve /m --max-num-seqs 64",
])
def test_direct_units_of_every_supported_form(exec_start: str) -> None:
    cat = f"# {FRAG}\n[Service]\nExecStart={exec_start}\n"
    p = plan(source(cat), spec("set", "max-num-seqs 8"))
    assert p.action == "write" and p.argv[p.args_from:].count("--max-num-seqs") == 1
    assert p.argv[-1] == "8"


@pytest.mark.parametrize(("exec_start", "named"), [
    ("/bin/bash -c 'exec /opt/venv/bin/vllm serve /m'", "/bin/bash -c"),
    ("/usr/bin/docker run --gpus all vllm/vllm-openai:v0.20.1 --model /m", "/usr/bin/docker run"),
    ("/usr/bin/numactl --interleave=all /opt/venv/bin/vllm serve /m", "/usr/bin/numactl"),
    ("/usr/bin/sudo -u vllm /opt/venv/bin/vllm serve /m", "/usr/bin/sudo -u vllm"),
    ("/opt/venv/bin/python /opt/serve_model.py serve /m --tensor-parallel-size 8", "/opt/serve_model.py"),
    ("@/opt/venv/bin/vllm renamed serve /m", "renamed"),
])
def test_wrappers_are_refused_naming_what_runs(exec_start: str, named: str) -> None:
    reason = refused(source(f"# {FRAG}\n[Service]\nExecStart={exec_start}\n"), spec("set", "max-num-seqs 8"))
    assert reason.startswith("inferbot changes only units whose ExecStart= runs vLLM itself") and named in reason


def test_a_second_change_merges_into_inferbots_drop_in() -> None:
    first = plan(source(), spec("set", "max-num-seqs 256"))
    cat = KIMI + f"\n# {OURS}\n{first.dropin_text}"
    second = plan(source(cat, ours=first.dropin_text), spec("set", "env NCCL_PROTO=Simple"), "#2")
    assert second.previous == first.delta
    assert second.delta.set_flags == {"max-num-seqs": "256"} and second.delta.set_env == {"NCCL_PROTO": "Simple"}
    assert [d.key for d in second.diff] == ["NCCL_PROTO"]  # the diff is this change's, against what is on disk
    assert "change #2" in (second.dropin_text or "")
    # Setting the flag back to the operator's own value leaves only the variable; then nothing: the file goes.
    third = plan(source(KIMI + f"\n# {OURS}\n{second.dropin_text}", ours=second.dropin_text),
                 spec("set", "max-num-seqs 64"), "#3")
    assert third.delta.set_flags == {} and "ExecStart" not in (third.dropin_text or "")
    last = plan(source(KIMI + f"\n# {OURS}\n{third.dropin_text}", ours=third.dropin_text),
                spec("set", "env NCCL_PROTO=LL").model_copy(update={"set_env": {}, "unset_env": ["NCCL_PROTO"]}),
                "#4")
    assert last.action == "remove" and last.dropin_text is None


def test_a_change_that_changes_nothing() -> None:
    p = plan(source(), spec("set", "max-num-seqs 64 --enforce-eager"))
    assert p.changes_nothing and p.action == "nothing"
    assert plan(source(), spec("unset", "--max-loras")).changes_nothing


def test_contradictions_with_the_operators_files_are_refused() -> None:
    # A flag that comes from $EXTRA cannot be removed from the line.
    assert "comes from $EXTRA" in refused(source(), spec("unset", "--seed"))
    # A variable an EnvironmentFile sets wins over Environment=.
    assert "EnvironmentFile /etc/vllm/kimi.env" in refused(source(), spec("set", "env EXTRA=x"))
    # An operator drop-in applied after inferbot's (override.conf sorts after 90-…) would undo the change.
    later = (KIMI + f"\n# /etc/systemd/system/{UNIT}.d/override.conf\n[Service]\nExecStart=\n"
             "ExecStart=/opt/vllm/venv/bin/vllm serve /models/kimi --max-num-seqs 2\n")
    assert "override.conf sets ExecStart=" in refused(source(later), spec("set", "max-num-seqs 1"))
    # A file at inferbot's path that inferbot did not write.
    assert "inferbot did not write it" in refused(source(ours="[Service]\n"), spec("set", "max-num-seqs 1"))
    two = f"# {FRAG}\n[Service]\nType=oneshot\nExecStart=/opt/v/bin/vllm serve /a\nExecStart=/opt/v/bin/vllm serve /b\n"
    assert "2 ExecStart= lines" in refused(source(two), spec("set", "max-num-seqs 1"))


def test_an_unreadable_environment_file_is_said() -> None:
    p = plan(source(env_file=None), spec("set", "env NCCL_PROTO=Simple"))
    assert any("could not read EnvironmentFile /etc/vllm/kimi.env" in n for n in p.notes)


def test_secrets_stay_out_of_everything_shown_or_dumped() -> None:
    p = plan(source(), spec("set", "max-num-seqs 256"))
    assert SECRET in (p.dropin_text or "") and SECRET in p.argv  # the node needs them
    shown = p.model_dump_json() + repr(p) + p.dropin_shown + " ".join(p.command)
    assert SECRET not in shown and "hf_plan0token0value" not in shown
    assert "--api-key [redacted]" in p.dropin_shown and "[redacted]" in p.command


def test_template_instances_keep_their_specifiers() -> None:
    cat = ("# /etc/systemd/system/vllm@.service\n[Service]\n"
           "ExecStart=/opt/v/bin/vllm serve /models/%i --port %i --max-num-seqs 4\n")
    src = UnitSource(unit="vllm@8004.service", cat=cat, dropin_path="/etc/systemd/system/vllm@8004.service.d/9.conf")
    p = plan_change(src, spec("set", "max-num-seqs 8"), table_for("0.20.1")[0], "#1")
    assert isinstance(p, Plan)
    assert "serve /models/%i --port %i --max-num-seqs 8" in (p.dropin_text or "")
    assert p.argv[2:] == ["/models/8004", "--port", "8004", "--max-num-seqs", "8"]


def test_split_cat_keeps_files_apart() -> None:
    files = split_cat(KIMI + f"\n# {OURS}\n[Service]\nEnvironment=A=1\n")
    assert [p for p, _ in files] == [FRAG, OURS]
