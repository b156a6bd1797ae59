"""Summaries, ratios, goal verdicts, and the table / JSON / Markdown the benchmark leaves behind."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from tabulate import tabulate

from bench.common import RESULTS_DIR, read_vm_hwm_kib, summarize
from bench.contenders import Result

WARM, COLD = "inferbot warm", "inferbot cold"
MUX, SEQ, ANSIBLE = "OpenSSH parallel mux", "OpenSSH sequential", "Ansible ad-hoc"
CPU_GOAL_MS = 5.0
RSS_GOAL_MB = 100.0
READINESS_SLACK_S = 1.0


def result_row(r: Result) -> dict[str, Any]:
    """One contender at one N, as plain data: medians/min/max of wall and of CPU per node per question."""
    ok = [x for x in r.runs if x.error is None]
    errors = [x.error for x in r.runs if x.error is not None]
    return {
        "contender": r.contender,
        "nodes": r.nodes,
        "unavailable": r.unavailable,
        "runs": len(r.runs),
        "failed_runs": len(errors),
        "errors": errors[:3],
        "wall_s": summarize([x.wall_s for x in ok]),
        "client_cpu_ms_per_node": summarize([x.cpu_s * 1000 / r.nodes for x in ok]),
        "peak_rss_mb": _rss_mb(r),
        "notes": r.notes,
        "extra": r.extra,
    }


RSS_CAVEAT = ("peak RSS is reported for inferbot only: the warm client reads its own VmHWM; inferbot cold's "
              "wait4 ru_maxrss is kept only when it exceeds this runner's own peak, because Linux carries the "
              "forking parent's RSS into a child's ru_maxrss (so an ssh or ansible child would show the runner's)")


def _rss_mb(r: Result) -> float | None:
    """Peak RSS in MB where it can be measured cleanly (see ``RSS_CAVEAT``), else None."""
    peak = max((x.peak_rss_kib for x in r.runs), default=0)
    if r.contender == WARM and peak:
        return round(peak / 1024, 1)
    if r.contender == COLD and peak > read_vm_hwm_kib():
        return round(peak / 1024, 1)
    return None


def _median(rows: list[dict[str, Any]], contender: str, n: int, key: str = "wall_s") -> float | None:
    for row in rows:
        if row["contender"] == contender and row["nodes"] == n and row[key]:
            return float(row[key]["median"])
    return None


def add_ratios(rows: list[dict[str, Any]]) -> None:
    """Each contender's median wall divided by inferbot warm's and inferbot cold's at the same N."""
    for row in rows:
        mine = row["wall_s"].get("median") if row["wall_s"] else None
        for key, ref in (("x_warm", WARM), ("x_cold", COLD)):
            base = _median(rows, ref, row["nodes"])
            row[key] = round(mine / base, 2) if mine is not None and base else None


def _fmt(v: float | None, digits: int = 3) -> str:
    return "—" if v is None else f"{v:.{digits}f}"


def goals(rows: list[dict[str, Any]], ns: list[int], readiness: dict[str, Any]) -> list[dict[str, Any]]:
    """Each goal of the issue with PASS / MISS / NOT MEASURED and the number it was judged on."""
    out: list[dict[str, Any]] = []

    per_n = []
    for n in ns:
        warm, mux = _median(rows, WARM, n), _median(rows, MUX, n)
        per_n.append((n, None if warm is None or mux is None else warm / mux))
    measured = [(n, r) for n, r in per_n if r is not None]
    out.append({
        "goal": "inferbot warm ≤ 1.0× OpenSSH parallel multiplexed, at every N",
        "target": "≤ 1.0×",
        "measured": ", ".join(f"N={n}: {r:.2f}×" for n, r in measured) or "—",
        "verdict": "NOT MEASURED" if not measured else ("PASS" if all(r <= 1.0 for _, r in measured) else "MISS"),
    })

    cold, ans = _median(rows, COLD, 64), _median(rows, ANSIBLE, 64)
    if cold is not None and ans is not None:
        ratio = cold / ans
        out.append({"goal": "inferbot cold ≤ 0.1× Ansible ad-hoc at N = 64", "target": "≤ 0.1×",
                    "measured": f"{ratio:.2f}× ({cold:.2f} s vs {ans:.2f} s)",
                    "verdict": "PASS" if ratio <= 0.1 else "MISS"})
    else:
        why = "N = 64 not run" if 64 not in ns else "Ansible not measured"
        out.append({"goal": "inferbot cold ≤ 0.1× Ansible ad-hoc at N = 64", "target": "≤ 0.1×",
                    "measured": f"— ({why})", "verdict": "NOT MEASURED"})

    cpus = [(n, _median(rows, WARM, n, "client_cpu_ms_per_node")) for n in ns]
    cpus_m = [(n, c) for n, c in cpus if c is not None]
    out.append({
        "goal": "client CPU per node per question ≤ 5 ms (inferbot warm, measured)",
        "target": f"≤ {CPU_GOAL_MS:g} ms",
        "measured": ", ".join(f"N={n}: {c:.1f} ms" for n, c in cpus_m) or "—",
        "verdict": "NOT MEASURED" if not cpus_m else ("PASS" if all(c <= CPU_GOAL_MS for _, c in cpus_m) else "MISS"),
    })

    warm64 = next((r for r in rows if r["contender"] == WARM and r["nodes"] == 64 and r["runs"]), None)
    if warm64 is not None:
        rss = warm64["peak_rss_mb"]
        out.append({"goal": "peak RSS of the bot process with 64 nodes ≤ 100 MB", "target": f"≤ {RSS_GOAL_MB:g} MB",
                    "measured": f"{rss:.1f} MB (VmHWM of the warm client, Slack front end imported: "
                                f"{warm64['extra'].get('slack_front_end_imported')})",
                    "verdict": "PASS" if rss <= RSS_GOAL_MB else "MISS"})
    else:
        biggest = max((r for r in rows if r["contender"] == WARM and r["runs"]), key=lambda r: r["nodes"],
                      default=None)
        seen = f" (at N={biggest['nodes']}: {biggest['peak_rss_mb']:.1f} MB)" if biggest else ""
        out.append({"goal": "peak RSS of the bot process with 64 nodes ≤ 100 MB", "target": f"≤ {RSS_GOAL_MB:g} MB",
                    "measured": f"— (N = 64 not run){seen}", "verdict": "NOT MEASURED"})

    if readiness.get("latency_s") is not None:
        limit = float(readiness["poll_interval_s"]) + READINESS_SLACK_S
        lat = float(readiness["latency_s"])
        out.append({"goal": "readiness notice ≤ poll interval + 1 s after /health turns 200",
                    "target": f"≤ {limit:g} s", "measured": f"{lat:.2f} s",
                    "verdict": "PASS" if lat <= limit else "MISS"})
    else:
        out.append({"goal": "readiness notice ≤ poll interval + 1 s after /health turns 200",
                    "target": "≤ poll + 1 s", "measured": readiness.get("status", "not measured"),
                    "verdict": "NOT MEASURED"})
    return out


def table_rows(rows: list[dict[str, Any]]) -> list[list[str]]:
    """The results table: one line per N and contender."""
    out = []
    for r in sorted(rows, key=lambda r: (r["nodes"], _order(r["contender"]))):
        if r["unavailable"]:
            out.append([str(r["nodes"]), r["contender"], "unavailable", "", "", "", "", "", "", "",
                        r["unavailable"][:60]])
            continue
        w, c = r["wall_s"], r["client_cpu_ms_per_node"]
        fails = f"{r['failed_runs']} failed" if r["failed_runs"] else ""
        out.append([str(r["nodes"]), r["contender"], _fmt(w.get("median")), _fmt(w.get("min")), _fmt(w.get("max")),
                    f"{w.get('n', 0)}", _fmt(r.get("x_warm"), 2), _fmt(r.get("x_cold"), 2),
                    _fmt(c.get("median"), 1), _fmt(r["peak_rss_mb"], 0), fails])
    return out


HEADERS = ["N", "contender", "median s", "min s", "max s", "runs", "× warm", "× cold", "CPU ms/node/q",
           "peak RSS MB", "failures"]


def _order(contender: str) -> int:
    names = [WARM, COLD, MUX, SEQ, ANSIBLE]
    return names.index(contender) if contender in names else len(names)


def markdown(report: dict[str, Any]) -> str:
    """The Markdown report (what the README's results section quotes)."""
    m = report["machine"]
    lines = [f"# inferbot benchmark — {report['finished_at']}", "",
             f"Question: “{report['question']}”, the same remote command for every contender "
             f"({report['remote_command']['bytes']} bytes per node; same as the bot sent: "
             f"{report['remote_command']['same_as_bot']}).", "",
             f"Key exchange negotiated with the nodes' sshd: "
             f"{', '.join(f'{k} {v}' for k, v in report.get('key_exchange', {}).items()) or 'unknown'}.", "",
             "## Machine", "",
             tabulate([[k, v if not isinstance(v, list) else ", ".join(map(str, v))] for k, v in m.items()],
                      headers=["", ""], tablefmt="github"), "",
             "## Goals", "",
             tabulate([[g["goal"], g["target"], g["measured"], g["verdict"]] for g in report["goals"]],
                      headers=["goal", "target", "measured", "verdict"], tablefmt="github"), "",
             "## Results (wall time per question; medians, min, max)", "",
             tabulate(report["table"], headers=HEADERS, tablefmt="github", disable_numparse=True), "",
             "## inferbot's SSH round trips and connections", "",
             tabulate([[n, v["round_trips_per_node"], v["connects"], v["nodes"]]
                       for n, v in report["inferbot"].items()],
                      headers=["N", "round trips per node per question", "connections opened", "nodes"],
                      tablefmt="github"), "",
             "## The simulator's own cost per question (probe run locally with sh, no SSH)", "",
             tabulate([[n, _fmt(v.get("wall_ms", {}).get("median"), 1), _fmt(v.get("cpu_ms", {}).get("median"), 1),
                        v.get("runs", 0)] for n, v in report["simulator"].items()],
                      headers=["N", "wall ms per node", "CPU ms per node", "samples"], tablefmt="github"), "",
             "## Readiness-notice latency", "", json.dumps(report["readiness"], indent=2, ensure_ascii=False)
             .join(["```json\n", "\n```"]), "",
             "## Notes", ""]
    lines += [f"- {n}" for n in report["notes"]]
    for r in report["results"]:
        for note in r["notes"]:
            lines.append(f"- {r['contender']} (N={r['nodes']}): {note}")
    return "\n".join(lines) + "\n"


def write(report: dict[str, Any]) -> tuple[Path, Path]:
    """``bench/results/latest.{json,md}`` plus timestamped copies."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    js, md = RESULTS_DIR / "latest.json", RESULTS_DIR / "latest.md"
    js.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    md.write_text(markdown(report))
    shutil.copy(js, RESULTS_DIR / f"{stamp}.json")
    shutil.copy(md, RESULTS_DIR / f"{stamp}.md")
    return js, md


def terminal(report: dict[str, Any]) -> str:
    """What is printed at the end of a run."""
    parts = [tabulate(report["table"], headers=HEADERS, tablefmt="simple", disable_numparse=True), "",
             tabulate([[g["goal"], g["target"], g["measured"], g["verdict"]] for g in report["goals"]],
                      headers=["goal", "target", "measured", "verdict"], tablefmt="simple")]
    return "\n".join(parts)
