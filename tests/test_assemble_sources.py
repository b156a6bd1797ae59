"""Where a service's settings come from, read from recorded probe output (no node): pick, cross-checks, text."""

from __future__ import annotations

import json

from services.models import HttpProbe, ServiceState
from services.node.assemble import NodeFacts, assemble
from services.node.probe import NodeRaw, ProcRow, ReadFile, UnitRaw

SHOW = """Id=x.service
LoadState=loaded
ActiveState=active
SubState=running
MainPID=100
ControlGroup=/system.slice/x.service
ExecStart={ path=/opt/launch ; argv[]=/opt/launch --profile prod ; ignore_errors=no ; start_time=[n/a] ; \
stop_time=[n/a] ; pid=100 ; code=(null) ; status=0/0 }
"""
CAT = "# /etc/systemd/system/x.service\n[Service]\nExecStart=/opt/launch --profile prod\n"


def nul(*argv: str) -> bytes:
    return b"".join(a.encode() + b"\0" for a in argv)


def raw(**kw: object) -> UnitRaw:
    base: dict[str, object] = {"unit": "x.service", "show": SHOW, "cat": CAT,
                               "cmdline": ReadFile(path="/proc/100/cmdline", rc=0, data=nul("/opt/launch", "--profile",
                                                                                            "prod"))}
    base.update(kw)
    return UnitRaw.model_validate(base)


def state(r: UnitRaw) -> ServiceState:
    return assemble("x", "n", r, NodeFacts(NodeRaw()))


LOG = ("(APIServer pid=101) INFO 12-02 10:00:00 [utils.py:253] non-default args: {'model_tag': '/m', "
       "'max_model_len': 65536, 'tensor_parallel_size': 4, 'api_key': ['sk-secret-abcdefgh12']}")


def test_child_argv_and_a_disagreeing_log() -> None:
    child = ProcRow(pid=101, ppid=100, comm="python3",
                    argv=["/v/python3", "/v/vllm", "serve", "/m", "--max-model-len", "32k", "-tp", "4"])
    st = state(raw(procs=[ProcRow(pid=100, ppid=1, comm="launch"), child], procs_src="/sys/fs/cgroup/x/cgroup.procs",
                   vargs=LOG))
    assert (st.settings_source, st.settings_pid) == ("cgroup-process", 101)
    assert st.flags == {"max-model-len": "32k", "tensor-parallel-size": "4"}  # as passed, 32k not 32000
    assert st.settings_note is not None and "a process in the unit's cgroup" in st.settings_note
    joined = " ".join(st.warnings)
    assert "disagrees with the command line of PID 101" in joined
    assert "--max-model-len 32k (command line) vs 65536 (log)" in joined
    assert "tensor-parallel-size" not in joined  # 4 == 4
    assert "sk-secret" not in json.dumps(st.model_dump(mode="json"))


def test_human_sizes_agree_with_the_log() -> None:
    child = ProcRow(pid=101, ppid=100, argv=["vllm", "serve", "/m", "--max-model-len", "64K", "-tp", "4"])
    st = state(raw(procs=[child], procs_src="ppid", vargs=LOG))
    assert not any("disagrees" in w for w in st.warnings)


def test_nothing_readable_says_what_was_tried() -> None:
    engine = ProcRow(pid=102, ppid=100, comm="VLLM::EngineCor", argv=["VLLM::EngineCore"])
    r = raw(procs=[ProcRow(pid=100, ppid=1, comm="launch"), engine], procs_src="ppid", journal="",
            journal_src="invocation", url="http://127.0.0.1:8000",
            health=HttpProbe(url="http://127.0.0.1:8000/health", curl_exit=7))
    st = state(r)
    assert st.settings_source == "none" and st.flags == {} and st.model is None
    tried = "\n".join(st.settings_tried)
    assert "/proc/100/cmdline (main process): `/opt/launch --profile prod` is no vLLM server command line" in tried
    assert "1 other process(es) under the main process" in tried and "102 (VLLM::EngineCor)" in tried
    assert "the journal (invocation): empty or not readable" in tried
    assert "/version: no answer" in tried and "/v1/models: not asked" in tried
    assert not any("No `vllm serve`" in w for w in st.warnings)


def test_config_yaml_mapping_keeps_its_order_and_json_text_is_kept() -> None:
    yaml_text = "model: /m\ncompilation-config:\n  mode: 3\n  cudagraph_mode: FULL\n"
    argv = ["vllm", "serve", "--config", "/etc/v.yaml", "--hf-overrides", '{"b":1,  "a":2}']
    r = raw(cmdline=ReadFile(path="/proc/100/cmdline", rc=0, data=nul(*argv)),
            files={"/etc/v.yaml": ReadFile(path="/etc/v.yaml", rc=0, data=yaml_text.encode())})
    st = state(r)
    assert st.settings_source == "process"
    # vLLM turns the mapping into JSON in the file's order; the command-line JSON is kept byte for byte.
    assert st.flags["compilation-config"] == '{"mode": 3, "cudagraph_mode": "FULL"}'
    assert st.flags["hf-overrides"] == '{"b":1,  "a":2}'
    assert st.redacted_flags == []


def test_models_without_a_key_is_a_second_source() -> None:
    body = json.dumps({"object": "list", "data": [{"id": "m", "root": "/m", "max_model_len": 4096, "parent": None}]})
    child = ProcRow(pid=101, ppid=100, argv=["vllm", "serve", "/m", "--max-model-len", "8192"])
    r = raw(procs=[child], procs_src="ppid", url="http://h:1",
            models=HttpProbe(url="http://h:1/v1/models", status=200, body=body), models_keyed=False)
    st = state(r)
    assert (st.api_model, st.api_max_model_len) == ("/m", 4096)
    assert st.served_models == ["m", "/m"] and st.models_error is None
    assert any("/v1/models reports max_model_len 4096" in w for w in st.warnings)
    # 401 without a key is no warning about the bot's key (it holds none).
    r401 = raw(url="http://h:1", models=HttpProbe(url="http://h:1/v1/models", status=401, body="{}"))
    assert not any("refused the API key" in w for w in state(r401).warnings)


def test_the_parent_api_server_wins_over_forked_copies_and_wrappers() -> None:
    serve = ["/v/python3", "/v/vllm", "serve", "/m", "-tp", "2"]
    main = ReadFile(path="/proc/100/cmdline", rc=0, data=nul("uv", "run", "vllm", "serve", "/m", "-tp", "2"))
    procs = [ProcRow(pid=100, ppid=1, comm="uv"),
             ProcRow(pid=90, ppid=1, comm="sudo", argv=["sudo", "-u", "x", *serve]),  # a wrapper again
             ProcRow(pid=103, ppid=101, comm="python3", argv=serve),  # forked helper: same argv as its parent
             ProcRow(pid=101, ppid=100, comm="python3", argv=serve),
             ProcRow(pid=104, ppid=101, comm="VLLM::EngineCor", argv=["VLLM::EngineCore"])]
    st = state(raw(cmdline=main, procs=procs, procs_src="/sys/fs/cgroup/system.slice/x.service/cgroup.procs"))
    assert (st.settings_source, st.settings_pid) == ("cgroup-process", 101)
    assert st.flags == {"tensor-parallel-size": "2"}
    assert st.settings_note is not None and "is a wrapper (uv run)" in st.settings_note


def test_unreadable_proc_answers_from_the_log_and_redacts_what_it_holds() -> None:
    log = ("(APIServer pid=100) INFO 12-02 10:00:00 [utils.py:253] non-default args: {'model_tag': '/m', "
           "'tensor_parallel_size': 8, 'kv_transfer_config': {'kv_connector': 'X', "
           "'kv_connector_extra_config': {'api_key': 'lmc-very-secret-1'}}, 'hf_token': 'hf_zzzzzzzzzzzz1'}")
    cat = "# /etc/systemd/system/x.service\n[Service]\nExecStart=/v/vllm serve /m -tp 4\n"
    r = raw(cat=cat, cmdline=ReadFile(path="/proc/100/cmdline", rc=1), vargs=log,
            logs=log + "\nerror: connector said lmc-very-secret-1 is wrong")
    st = state(r)
    assert st.settings_source == "vllm-log"  # what runs, not the unit file (-tp 4) that may have been edited
    assert (st.model, st.flags["tensor-parallel-size"], st.flags["hf-token"]) == ("/m", "8", "[redacted]")
    assert "not readable" in " ".join(st.settings_tried)
    dumped = json.dumps(st.model_dump(mode="json"))
    assert "lmc-very-secret-1" not in dumped and "hf_zzzz" not in dumped
