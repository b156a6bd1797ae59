"""The benchmark's cheap nodes and its verdicts (issue 15): no timings are asserted here.

A cheap node is a real sshd that answers the bot's probe with a recorded answer of the simulated Kimi node;
the benchmark judges its goals from the numbers it measured. Both must be right for the benchmark to be a
fair judge: the node must return exactly the recorded bytes over real SSH (host key checked), and a goal
must read PASS, MISS or NOT MEASURED exactly as its numbers say.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench import push_report, report
from bench.chart import draw, series
from bench.cheap import GROUP, WARM_COMMAND, Group, cheap_host, record, start_group, write_answers
from bench.contenders import END_MARK, Result, Run
from config.models import Node
from services.node.probe import parse_output, session_answer_end
from services.node.ssh import NodePool, NodeUnreachable
from tests.sshd import ClientKey


@pytest.fixture
def workdir() -> Iterator[Path]:
    d = Path(tempfile.mkdtemp(prefix="inferbot-cheap-", dir="/tmp"))
    os.chmod(d, 0o755)  # sshd reads the answers as the login user
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _node(group: Group, host: str, user: str, key: ClientKey, known_hosts: Path) -> Node:
    return Node(name="cheap", host=host, port=group.port, user=user, key_file=str(key.private),
                known_hosts=str(known_hosts), timeout=20)


async def _openssh_reads_the_recorded_bytes(group: Group, host: str, user: str, key: ClientKey, known_hosts: Path,
                                            settings_command: str, settings: bytes) -> None:
    """OpenSSH's client, byte for byte, with the host key checked."""
    base = ["ssh", "-F", "/dev/null", "-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=yes",
            "-o", "BatchMode=yes", "-o", "GlobalKnownHostsFile=/dev/null", "-i", str(key.private),
            "-p", str(group.port), f"{user}@{host}"]
    out = await asyncio.to_thread(subprocess.run, [*base, settings_command], capture_output=True,
                                  timeout=30, check=False)
    assert out.returncode == 0 and out.stdout == settings
    out = await asyncio.to_thread(subprocess.run, [*base, WARM_COMMAND], capture_output=True, timeout=30,
                                  check=False)
    assert out.returncode == 0 and out.stdout == b""


async def test_a_cheap_node_answers_the_bots_probe_with_exactly_the_recorded_bytes(
        workdir: Path, client_key: ClientKey, ssh_user: str) -> None:
    # Recorded here from a real simulated Kimi node over real SSH, as the benchmark does.
    rec = await record(workdir, client_key, ssh_user, node_cost=False)
    settings, watch = rec["settings_answer"], rec["watch_answer"]
    assert END_MARK.encode() in settings and END_MARK.encode() in watch
    assert parse_output(settings.decode()).units[0].unit == "vllm-kimi-k25-int4.service"
    answers = workdir / "answers"
    session = rec["watch_session_answer"]  # the leader's watcher: one persistent session per node
    write_answers(answers, {rec["settings_command"]: settings, rec["watch_command"]: watch, WARM_COMMAND: b"",
                            rec["watch_session_command"]: session}, [rec["watch_session_command"]])
    hosts = [cheap_host(0), cheap_host(1)]
    group = await asyncio.to_thread(start_group, hosts, workdir / "g0", client_key.public, answers)
    try:
        known_hosts = workdir / "known_hosts"
        known_hosts.write_text("".join(x + "\n" for x in group.known_hosts_lines()))
        pool = NodePool()
        try:
            for host in hosts:
                node = _node(group, host, ssh_user, client_key, known_hosts)
                got = await pool.run(node, rec["settings_command"])
                assert got.exit_status == 0 and got.stdout == settings.decode()
                got = await pool.run(node, rec["watch_command"])
                assert got.stdout == watch.decode()
                # Any other command is refused loudly, never answered with a recorded answer.
                other = await pool.run(node, "id")
                assert other.exit_status != 0 and other.stdout == ""
            # The watcher's session: one channel, the recorded answer (its "done" line cut off) once per poll.
            end = session_answer_end(bytearray(session))
            assert end is not None and END_MARK.encode() in session[:end]
            said, once = parse_output(session[:end].decode()), parse_output(watch.decode())
            assert said.complete and [(u.unit, u.show) for u in said.units] == [(u.unit, u.show) for u in once.units]
            pool.keep_sessions(True)
            node = _node(group, hosts[0], ssh_user, client_key, known_hosts)
            for _ in range(3):
                got = await pool.ask(node, rec["watch_session_command"], session_answer_end)
                assert got.stdout == session[:end].decode()
            assert pool.session_opens == 1
        finally:
            await pool.close()
        await _openssh_reads_the_recorded_bytes(group, hosts[1], ssh_user, client_key, known_hosts,
                                                rec["settings_command"], settings)
        # A host key that is not the one on record is refused: the nodes are checked like real ones.
        (workdir / "wrong").write_text(f"[{hosts[0]}]:{group.port} {ClientKey(workdir).public.read_text()}")
        wrong = _node(group, hosts[0], ssh_user, client_key, workdir / "wrong")
        pool = NodePool()
        try:
            with pytest.raises(NodeUnreachable) as e:
                await pool.run(wrong, rec["settings_command"])
            assert e.value.error.kind == "host_key"
        finally:
            await pool.close()
    finally:
        group.stop()


def test_two_recorded_commands_of_one_length_are_refused(workdir: Path) -> None:
    with pytest.raises(ValueError, match="same length"):
        write_answers(workdir / "a", {"abc": b"1", "xyz": b"2"})


def test_cheap_addresses_stay_on_loopback_and_off_127_0_0() -> None:
    hosts = [cheap_host(i) for i in range(1024)]
    assert len(set(hosts)) == 1024
    assert hosts[0] == "127.0.1.2" and hosts[249] == "127.0.1.251" and hosts[250] == "127.0.2.2"
    assert all(h.startswith("127.") and not h.startswith("127.0.0.") for h in hosts)
    assert GROUP == 16


# ----------------------------------------------------------------------------------------------------------
# verdicts from sample numbers


def _result(contender: str, n: int, walls: list[float], cpu_ms_per_node: float, cluster: str,
            rss_kib: int = 0, **extra: Any) -> Result:
    runs = [Run(wall_s=w, cpu_s=cpu_ms_per_node * n / 1000, peak_rss_kib=rss_kib) for w in walls]
    return Result(contender, n, runs=runs, cluster=cluster, extra=dict(extra))


def _rows(results: list[Result]) -> list[dict[str, Any]]:
    rows = [report.result_row(r) for r in results]
    report.add_ratios(rows)
    return rows


def _by_goal(goals: list[dict[str, Any]], words: str) -> dict[str, Any]:
    return next(g for g in goals if words in g["goal"])


NODE_COST = {"settings": {"loading": {"cpu_ms": {"median": 35.0}, "forks": 20},
                          "ready": {"cpu_ms": {"median": 39.0}, "forks": 24}},
             "watch": {"loading": {"cpu_ms": {"median": 5.0}, "forks": 3},
                       "ready": {"cpu_ms": {"median": 9.0}, "forks": 5}}}
WATCH_OK = {"nodes": 512, "interval_s": 15.0, "cpu_percent_of_one_core": 1.5, "window_cpu_s": 0.68,
            "window_s": 45.0, "cpu_ms_per_poll": 0.9, "errors": []}


def _all_pass_rows() -> list[dict[str, Any]]:
    cheap = report.CHEAP
    return _rows([
        _result(report.WARM, 1, [0.010, 0.011, 0.012], 2.0, cheap, 90_000, slack_front_end_imported=True),
        _result(report.MUX, 1, [0.012, 0.013], 4.0, cheap),
        _result(report.WARM, 512, [1.0, 1.1], 2.9, cheap, 115 * 1024, slack_front_end_imported=True,
                render_cpu_ms_per_node=[1.2, 1.1, 1.3], first_start_peak_rss_kib=130 * 1024),
        _result(report.MUX, 512, [2.0, 2.1], 4.0, cheap),
        _result(report.COLD, 1, [0.5, 0.55, 0.58], 400.0, report.SIM),
        _result(report.SEQ, 1, [0.4, 0.41], 70.0, report.SIM),
    ])


def test_goals_pass_when_every_number_is_within_its_target() -> None:
    goals = report.goals(_all_pass_rows(), [1, 512], {"help": {"wall_s": {"median": 0.25}}}, NODE_COST, WATCH_OK)
    assert [g["verdict"] for g in goals] == ["PASS"] * len(goals), goals
    assert _by_goal(goals, "warm ≤ 1.0×")["measured"] == "N=1: 0.88×, N=512: 0.51×"
    assert _by_goal(goals, "client CPU")["measured"] == (
        "N=1: 2.00 ms, N=512: 2.90 ms (and the Slack render: N=1: —, N=512: 1.20 ms)")
    assert "115.0 MB" in _by_goal(goals, "peak RSS")["measured"]
    assert "first start: 130.0 MB" in _by_goal(goals, "peak RSS")["measured"]
    assert _by_goal(goals, "÷ one-shot")["measured"] == "1.36× (0.55 s vs 0.41 s)"
    assert "ready node: 39.0 ms, 24 forks" in _by_goal(goals, "settings probe's CPU")["measured"]


def test_goals_miss_on_the_first_number_past_its_target() -> None:
    cheap = report.CHEAP
    rows = _rows([
        _result(report.WARM, 1, [0.010], 2.0, cheap, 90_000),
        _result(report.MUX, 1, [0.012], 4.0, cheap),
        _result(report.WARM, 512, [2.2], 3.1, cheap, 121 * 1024),  # slower than mux, 3.1 ms, 121 MB
        _result(report.MUX, 512, [2.0], 4.0, cheap),
        _result(report.COLD, 1, [0.9], 400.0, report.SIM),  # 0.9 s, and 2.25× the one-shot ssh
        _result(report.SEQ, 1, [0.4], 70.0, report.SIM),
    ])
    cost = {"settings": {"loading": {"cpu_ms": {"median": 41.0}}},
            "watch": {"loading": {"cpu_ms": {"median": 41.0}}}}  # not lighter than the probe
    watch = {**WATCH_OK, "cpu_percent_of_one_core": 2.1}
    goals = report.goals(rows, [1, 512], {"help": {"wall_s": {"median": 0.31}}}, cost, watch)
    assert [g["verdict"] for g in goals] == ["MISS"] * len(goals), goals
    assert _by_goal(goals, "warm ≤ 1.0×")["measured"] == "N=1: 0.83×, N=512: 1.10×"


def _push(ready: list[float], deaths: list[float]) -> dict[str, Any]:
    def kind(vals: list[float]) -> dict[str, Any]:
        return {"n": len(vals), "failed": 0, "median_s": sorted(vals)[len(vals) // 2], "worst_s": max(vals),
                "best_s": min(vals)}

    kinds = push_report.DEATH_KINDS
    poll = {"readiness_summary": kind([7.0, 12.0]), **{f"{k}_summary": kind([30.0]) for k in kinds}}
    return {"status": "measured", "loads_s": [2.0, 14.0],
            "push": {"readiness_summary": kind(ready), **{f"{k}_summary": kind(deaths) for k in kinds}},
            "poll": poll}


WATCH_PUSH_OK: dict[str, Any] = {
    "nodes": 512, "services": 512, "interval_s": 120.0, "cpu_percent_of_one_core": 0.4, "window_cpu_s": 0.48,
    "window_s": 120.0, "streams_open_at_end": 512, "window_stream_opens": 0, "errors": [],
    "node_side": {"journalctl_processes": 512, "rss_kib": {"median": 7200.0}, "pss_kib": {"median": 1100.0}}}


def test_push_goals_pass_within_their_targets_with_todays_polls_beside() -> None:
    goals = push_report.push_goals(_push([0.2, 0.9, 1.9], [1.2, 1.9]), WATCH_PUSH_OK, WATCH_OK)
    assert [g["verdict"] for g in goals] == ["PASS"] * 6, goals
    ready = _by_goal(goals, "readiness")["measured"]
    assert "median 0.90 s, worst 1.90 s" in ready and "today's poll: median 12.00 s, worst 12.00 s" in ready
    assert "0.40 %" in _by_goal(goals, "idle cost")["measured"]
    assert "today's polls every 15 s: 1.50 %" in _by_goal(goals, "idle cost")["measured"]
    assert "1.00 per node" in _by_goal(goals, "node side")["measured"]


def test_push_goals_miss_past_their_targets() -> None:
    # median 1.1 s > 1 s; a death 2.1 s; 1.2 % of a core; two processes per node
    watch = {**WATCH_PUSH_OK, "cpu_percent_of_one_core": 1.2,
             "node_side": {**WATCH_PUSH_OK["node_side"], "journalctl_processes": 1024}}
    goals = push_report.push_goals(_push([0.5, 1.1, 1.5], [0.5, 2.1]), watch, WATCH_OK)
    assert [g["verdict"] for g in goals] == ["MISS"] * 6, goals
    worst_only = push_report.push_goals(_push([0.2, 0.3, 2.1], [0.5]), WATCH_PUSH_OK, WATCH_OK)
    assert _by_goal(worst_only, "readiness")["verdict"] == "MISS"  # the worst past 2 s, the median well within


def test_push_goals_not_measured_without_their_runs() -> None:
    goals = push_report.push_goals({"status": "skipped (--push skip)"}, {"status": "skipped"}, {"status": "skipped"})
    assert [g["verdict"] for g in goals] == ["NOT MEASURED"] * 6, goals
    assert "skipped (--push skip)" in _by_goal(goals, "readiness")["measured"]


def test_goals_not_measured_when_a_number_is_missing_and_none_missed() -> None:
    cheap = report.CHEAP
    rows = _rows([
        _result(report.WARM, 1, [0.010], 2.0, cheap, 90_000),
        _result(report.MUX, 1, [0.012], 4.0, cheap),
        Result(report.WARM, 512, unavailable="stopped before N=512: memory", cluster=cheap),
        Result(report.MUX, 512, unavailable="stopped before N=512: memory", cluster=cheap),
    ])
    goals = report.goals(rows, [1, 512], {}, {}, {"status": "skipped"})
    assert {g["verdict"] for g in goals} == {"NOT MEASURED"}, goals
    assert _by_goal(goals, "warm ≤ 1.0×")["measured"] == "N=1: 0.83×, N=512: —"
    # The watcher measured at another N than the goal's is reported but not judged.
    goals = report.goals(rows, [1], {}, {}, {**WATCH_OK, "nodes": 256})
    assert _by_goal(goals, "watcher polls")["verdict"] == "NOT MEASURED"
    assert _by_goal(goals, "warm ≤ 1.0×")["verdict"] == "PASS"


def test_simulated_and_cheap_rows_are_never_mixed() -> None:
    rows = _rows([
        _result(report.WARM, 64, [1.0], 8.0, report.SIM, 100_000),
        _result(report.MUX, 64, [0.5], 12.0, report.SIM),
        _result(report.WARM, 64, [0.1], 2.0, report.CHEAP, 100_000),
        _result(report.MUX, 64, [0.2], 4.0, report.CHEAP),
    ])
    assert _by_goal(report.goals(rows, [64], {}, {}, {}), "warm ≤ 1.0×")["verdict"] == "PASS"  # cheap: 0.5×
    assert report.earlier_goals(rows, [64], {})[0]["verdict"] == "MISS"  # simulated: 2.0×
    assert [r["x_warm"] for r in rows] == [1.0, 0.5, 1.0, 2.0]


def test_the_chart_is_drawn_from_the_rows(workdir: Path) -> None:
    rows = _all_pass_rows()
    assert set(series(rows)) == {(report.WARM, report.CHEAP), (report.MUX, report.CHEAP),
                                 (report.COLD, report.SIM), (report.SEQ, report.SIM)}
    assert draw(rows, workdir / "chart.png")
    assert (workdir / "chart.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not draw([], workdir / "none.png")
