"""Issue 26's goals 5 and 6, judged from what ``bench.slack_path`` measured, and their part of the report."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from bench.real_cheap import QUESTIONS

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
    for kind, what in (("identical", "50 people asking the same question (status) at once"),
                       ("mixed", "50 people asking at once, four questions in turn (settings, status, GPUs, "
                                 "throughput), each question's slowest against it asked alone")):
        texts, ok = [], True
        for b in result.get("bursts", []):
            x = b[kind]
            ratio = worst_vs_alone(b, kind)
            texts.append(f"N={b['nodes']}: {_fmt(ratio)}× (slowest {_fmt(x['slowest_s'])} s), "
                         f"{x['answered']}/{x['asked']} answered, {x['unreachable']} unreachable, {x['busy']} busy, "
                         f"{x['ssh_execs_per_node']:g} execs/node")
            ok = ok and x["answered"] == x["asked"] and not x["unreachable"] and not x["busy"] and \
                ratio is not None and ratio <= BURST_VS_ONE
            if kind == "identical":
                ok = ok and x["ssh_execs_per_node"] <= 1.0
        out.append({"goal": f"bursts through Slack (8 and 64 nodes), {what}: every answer, none \"unreachable\" or "
                            "\"busy\", slowest ≤ 1.5× the question asked alone"
                            + (", one SSH exec per node" if kind == "identical" else ""),
                    "target": f"≤ {BURST_VS_ONE:g}×", "measured": "; ".join(texts) or "—",
                    "verdict": "NOT MEASURED" if not texts else ("PASS" if ok else "MISS")})
    return out


def by_kind_vs_alone(burst: dict[str, Any], kind: str) -> dict[str, float | None]:
    """Each question of a burst: its slowest answer ÷ its median wall asked alone (None: one went unanswered)."""
    x, alone = burst[kind], burst.get("alone", {})
    out: dict[str, float | None] = {}
    for name, one in alone.items():
        question = QUESTIONS.get(name, name)
        if question not in x.get("slowest_by_question", {}) and not (kind == "identical" and name == "status"):
            continue
        slowest = x.get("slowest_by_question", {}).get(question)
        out[name] = None if slowest is None or x["answered"] < x["asked"] else slowest / one["wall_s"]
    return out


def worst_vs_alone(burst: dict[str, Any], kind: str) -> float | None:
    """The goal's ratio for a burst: the worst over its questions of slowest ÷ the same question asked alone.
    A mixed burst is judged per question: its slowest answer over the slowest question alone would hide a fast
    question made slow by the others."""
    ratios = by_kind_vs_alone(burst, kind)
    if not ratios:
        overall: float | None = burst[kind].get("slowest_vs_one")  # a result written before the questions were kept
        return overall
    return None if any(r is None for r in ratios.values()) else max(r for r in ratios.values() if r is not None)


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
            each = ", ".join(f"{k} {_fmt(r)}×" for k, r in by_kind_vs_alone(b, kind).items())
            one_cpu = b.get("alone", {}).get("status", {}).get("bot_cpu_s") if kind == "identical" else None
            cpu = _fmt(x["bot_cpu_s"], 3) + (f" ({x['bot_cpu_s'] / one_cpu:.1f}× one answer)" if one_cpu else "")
            brow.append([b["nodes"], kind, f"{x['answered']}/{x['asked']}", _fmt(x["slowest_s"]), _fmt(x["median_s"]),
                         each, x["unreachable"], x["busy"], f"{x['ssh_execs_per_node']:g}", cpu])
    if brow:
        lines += [tabulate(brow, headers=["N", "burst", "answered", "slowest s", "median s",
                                          "slowest ÷ the question alone", "unreachable", "busy", "SSH execs/node",
                                          "bot CPU s"],
                           tablefmt="github", disable_numparse=True), "",
                  "Each question asked alone: " + "; ".join(
                      f"N={b['nodes']} " + ", ".join(f"{k} {v['wall_s']:.2f} s / {v['bot_cpu_s'] * 1000:.0f} ms CPU"
                                                     for k, v in b.get("alone", {}).items())
                      for b in result.get("bursts", [])) + " (median wall / the bot's CPU, 3 each). The identical "
                  "burst's bot CPU against one answer's: each asker costs its own event, store claim and posts; the "
                  "answer is made once.", ""]
    return lines
