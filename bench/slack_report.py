"""Issue 26's goals 5 and 6, judged from what ``bench.slack_path`` measured, and their part of the report."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

CLIENT_CPU_MS = 3.0  # goal 6: per node per question, the Slack path, render and posts included
BURST_VS_ONE = 1.5  # goal 5: the slowest answer of a burst ÷ one question's wall


def _fmt(v: float | None, digits: int = 2) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def goals(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Goal 6 (client CPU) and goal 5 (bursts), PASS / MISS / NOT MEASURED with the numbers."""
    if not result or result.get("status"):
        why = (result or {}).get("status", "not run")
        return [{"goal": g, "target": t, "measured": f"— ({why})", "verdict": "NOT MEASURED"} for g, t in (
            ("client CPU per node per question, the serving bot through Slack", f"≤ {CLIENT_CPU_MS:g} ms"),
            ("bursts of 50 people through Slack, 8 and 64 nodes", f"≤ {BURST_VS_ONE:g}×"))]
    cpu = result.get("client_cpu", [])
    parts = [f"N={c['nodes']} {_short(c['question'])}: {c['cpu_ms_per_node_median']:.2f} ms" for c in cpu]
    worst = max((c["cpu_ms_per_node_median"] for c in cpu), default=None)
    out = [{"goal": "client CPU per node per question, the serving bot (`inferbot serve --http`) through a Slack "
                    "stand-in, render and posts included, on real-systemd answers (cheap nodes)",
            "target": f"≤ {CLIENT_CPU_MS:g} ms", "measured": "; ".join(parts) or "—",
            "verdict": "NOT MEASURED" if worst is None else ("PASS" if worst <= CLIENT_CPU_MS else "MISS")}]
    texts, ok = [], True
    for b in result.get("bursts", []):
        for kind in ("identical", "mixed"):
            x = b[kind]
            texts.append(f"N={b['nodes']} {kind}: {_fmt(x['slowest_vs_one'])}× ({_fmt(x['slowest_s'])} s vs "
                         f"{_fmt(x['one_question_s'])} s), {x['answered']}/{x['asked']} answered, "
                         f"{x['unreachable']} unreachable, {x['busy']} busy, {x['ssh_execs_per_node']:g} execs/node")
            ok = ok and x["answered"] == x["asked"] and not x["unreachable"] and not x["busy"] and \
                x["slowest_vs_one"] is not None and x["slowest_vs_one"] <= BURST_VS_ONE
        ok = ok and b["identical"]["ssh_execs_per_node"] <= 1.0
    out.append({"goal": "bursts: 50 people asking at once through Slack (8 and 64 nodes): every answer, none "
                        "\"unreachable\" or \"busy\", slowest ≤ 1.5× one question, identical ones 1 SSH exec per node",
                "target": f"≤ {BURST_VS_ONE:g}×", "measured": "; ".join(texts) or "—",
                "verdict": "NOT MEASURED" if not texts else ("PASS" if ok else "MISS")})
    return out


def _short(question: str) -> str:
    return "settings" if "settings" in question else question


def section(result: dict[str, Any]) -> list[str]:
    """The Markdown section: how it was measured, the client CPU per N and question, the bursts."""
    if not result:
        return []
    if result.get("status"):
        return ["## The Slack path (issue 26, goals 5 and 6)", "", str(result["status"]), ""]
    rec = result.get("recording", {})
    lines = ["## The Slack path (issue 26, goals 5 and 6; bench/slack_path.py, bench/bursts.py)", "",
             "`inferbot serve --http` in its own process, a Slack stand-in (tests/slack/fake_slack.py) sending signed "
             "`app_mention` events and receiving every `chat.postMessage`, cheap nodes replaying what a real-systemd "
             f"node running a busy vLLM answered ({rec.get('from', '?')}, recorded {rec.get('recorded_at', '?')}; "
             f"answers after the node's recorded time: {rec.get('node_s') is not None}). CPU: the bot process's, from "
             "/proc, outside it.", ""]
    rows = [[c["nodes"], _short(c["question"]), _fmt(c["cpu_ms_per_node_median"]), _fmt(c["cpu_ms_per_node_batch"]),
             _fmt(c.get("user_ms_per_node_batch")), _fmt(c.get("sys_ms_per_node_batch")), _fmt(c["wall_s_median"], 3),
             c["messages"], c["runs"]] for c in result.get("client_cpu", [])]
    if rows:
        lines += [tabulate(rows, headers=["N", "question", "CPU ms/node (median)", "batch", "user", "sys", "wall s",
                                          "messages", "runs"], tablefmt="github", disable_numparse=True), ""]
    brow = []
    for b in result.get("bursts", []):
        for kind in ("identical", "mixed"):
            x = b[kind]
            brow.append([b["nodes"], kind, f"{x['answered']}/{x['asked']}", _fmt(x["slowest_s"]), _fmt(x["median_s"]),
                         _fmt(x["one_question_s"]), _fmt(x["slowest_vs_one"]), x["unreachable"], x["busy"],
                         f"{x['ssh_execs_per_node']:g}", _fmt(x["bot_cpu_s"], 3)])
    if brow:
        lines += [tabulate(brow, headers=["N", "burst", "answered", "slowest s", "median s", "one question s",
                                          "slowest ÷ one", "unreachable", "busy", "SSH execs/node", "bot CPU s"],
                           tablefmt="github", disable_numparse=True), ""]
    return lines
