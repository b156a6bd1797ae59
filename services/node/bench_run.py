"""The acceptance benchmark: a fixed ``vllm bench serve`` template run on the node, and its comparison.

Two runs, always with the same settings — concurrency 1 and the configured peak level, a small fixed
number of random prompts of fixed lengths, labelled ``inferbot-acceptance`` — each saved with
``--save-result`` into the service's ``bench_dir``. Every value in the template comes from the validated
config or from the running server's own flags (checked against a conservative pattern here), each
shlex-quoted; the API key travels on stdin into ``OPENAI_API_KEY`` (what ``vllm bench serve`` reads),
never on a command line. After the runs the node sends the same ``grep`` extract of the bench files the
probe reads (``services/parse/bench.py`` parses it), so the previous result of the same settings is found among
whatever else the directory holds.
"""

from __future__ import annotations

import base64
import re
import shlex
from typing import Any, Literal

from pydantic import Field

from config.models import API_URL_RE, PATH_RE, Node, Service
from services.models import Model
from services.node.probe import BENCH_KEYS, remote_command
from services.node.ssh import NodePool, NodeUnreachable
from services.parse.bench import FILE_KEY, parse_bench_extract
from services.redact import Redactor

LABEL = "inferbot-acceptance"
INPUT_LEN = 512
OUTPUT_LEN = 128
SINGLE_PROMPTS = 8
MARK = "@@inferbot-bench@@"
NAME_RE = re.compile(r"^[A-Za-z0-9._/:@+-]{1,256}\Z")
MINUS = "\u2212"


def num_prompts(concurrency: int) -> int:
    """The fixed number of prompts at one concurrency level: 8 single-stream, two rounds at the peak."""
    return SINGLE_PROMPTS if concurrency == 1 else 2 * concurrency


_SCRIPT = r"""set -u
IFS= read -r K || K=''
case $D in "~/"*) D="$HOME/${D#\~/}";; esac
mkdir -p -- "$D" 2>/dev/null
ST=$(date +%Y%m%d-%H%M%S)
E=$(mktemp 2>/dev/null || echo /tmp/inferbot-bench.$$)
one() {
  f="$LB-c$1-$ST.json"
  ( if [ -n "$K" ]; then OPENAI_API_KEY=$K; export OPENAI_API_KEY; fi
    exec "$V" bench serve --backend vllm --base-url "$U" --endpoint /v1/completions --model "$MD" \
      --served-model-name "$SN" --dataset-name random --random-input-len "$IL" --random-output-len "$OL" \
      --num-prompts "$2" --max-concurrency "$1" --seed 0 --label "$LB" \
      --save-result --result-dir "$D" --result-filename "$f" ) >/dev/null 2>"$E" </dev/null
  r=$?
  echo "$M run c=$1 rc=$r path=$D/$f"; tail -n 8 -- "$E" 2>/dev/null | base64 -w0; echo
  return $r
}
one 1 "$N1" && one "$CP" "$NP"
rm -f -- "$E"
ls -t -- "$D"/*.json 2>/dev/null | head -n 200 | while IFS= read -r f; do
  echo "$M benchfile path=$f"; grep -oE "\"($BK)\": ?(\"[^\"]*\"|[-0-9.eE+]+|null)" -- "$f" 2>/dev/null
done
echo "$M end"
"""


class BenchPlan(Model):
    """What the template will run (every field validated)."""

    vllm: str
    url: str
    model: str
    served: str
    bench_dir: str
    peak: int = Field(ge=2, le=512)


class LevelResult(Model):
    """One concurrency level: this run's throughput and the previous run of the same settings."""

    concurrency: int
    output_throughput: float
    date: str
    previous: float | None = None
    previous_date: str | None = None

    @property
    def change_pct(self) -> float | None:
        """Percent change against the previous run (None without one)."""
        if self.previous is None or self.previous <= 0:
            return None
        return (self.output_throughput - self.previous) / self.previous * 100.0


class BenchOutcome(Model):
    """The acceptance benchmark's result: both levels, or why it failed (``error`` is redacted)."""

    ok: bool
    single: LevelResult | None = None
    peak: LevelResult | None = None
    error: str = ""
    unreachable: bool = False


def plan_for(service: Service, url: str | None, model: str | None, served: str | None,
             command: list[str]) -> BenchPlan | str:
    """The validated plan for ``service``, or a sentence saying why none can be made."""
    if not service.bench_dir:
        return "no bench_dir is configured for it (where --save-result writes)"
    if not url or not API_URL_RE.match(url):
        return "the server's URL is unknown (set api_url)"
    if not model or not NAME_RE.match(model):
        return "the model it runs is unknown or has an unusual name"
    served = served or model
    if not NAME_RE.match(served):
        return "its served model name is unusual"
    vllm = service.acceptance.vllm
    if vllm is None:
        # A console script runs as "python3 /opt/vllm/.venv/bin/vllm serve …": look at the first two words.
        found = [w for w in command[:2] if w.rsplit("/", 1)[-1] == "vllm" and PATH_RE.match(w)]
        vllm = found[0] if found else "vllm"
    return BenchPlan(vllm=vllm, url=url.rstrip("/"), model=model, served=served, bench_dir=service.bench_dir,
                     peak=service.acceptance.peak_concurrency)


def build_bench_script(plan: BenchPlan) -> str:
    """The remote script for ``plan`` (values quoted; the key comes on stdin)."""
    for p in (plan.vllm, plan.bench_dir):
        if not PATH_RE.match(p) or ".." in p.split("/"):
            raise ValueError(f"refusing path {p!r}")
    if not API_URL_RE.match(plan.url):
        raise ValueError(f"refusing url {plan.url!r}")
    for n in (plan.model, plan.served):
        if not NAME_RE.match(n):
            raise ValueError("refusing a model name with unusual characters")
    q = shlex.quote
    head = (f"M={q(MARK)}; V={q(plan.vllm)}; U={q(plan.url)}; MD={q(plan.model)}; SN={q(plan.served)}; "
            f"D={q(plan.bench_dir)}; LB={q(LABEL)}; IL={INPUT_LEN}; OL={OUTPUT_LEN}; "
            f"N1={num_prompts(1)}; CP={plan.peak}; NP={num_prompts(plan.peak)}; BK={q(BENCH_KEYS)}\n")
    return head + _SCRIPT


def _same_settings(rec: dict[str, Any], model: str, concurrency: int) -> bool:
    return (rec.get("label") == LABEL and rec.get("model_id") == model and rec.get("max_concurrency") == concurrency
            and rec.get("num_prompts") == num_prompts(concurrency))


def _day(stamp: object) -> str:
    s = str(stamp or "")
    return f"{s[:4]}-{s[4:6]}-{s[6:8]}" if len(s) >= 8 and s[:8].isdigit() else s


def parse_bench_output(stdout: str, plan: BenchPlan, redactor: Redactor) -> BenchOutcome:
    """Read what the bench script printed: each run's exit status, then the bench files' extract (pure)."""
    runs: list[tuple[int, int, str, str]] = []  # (concurrency, rc, path, stderr tail)
    records: list[dict[str, Any]] = []
    lines = stdout.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith(MARK + " run "):
            kv = dict(re.findall(r"(\w+)=(\S*)", line.split(" path=", 1)[0]))
            path = line.split(" path=", 1)[1] if " path=" in line else ""
            tail = lines[i + 1] if i + 1 < len(lines) else ""
            try:
                err = base64.b64decode(tail.strip()).decode("utf-8", "replace")
            except ValueError:
                err = ""
            runs.append((int(kv.get("c", "0") or 0), int(kv.get("rc", "1") or 1), path, err))
            i += 2
            continue
        if line.startswith(MARK + " benchfile path="):
            path = line.split("path=", 1)[1]
            body: list[str] = []
            i += 1
            while i < len(lines) and not lines[i].startswith(MARK):
                body.append(lines[i])
                i += 1
            records.extend(parse_bench_extract(path, "\n".join(body)))
            continue
        i += 1
    if not runs:
        return BenchOutcome(ok=False, error="the benchmark did not run on the node (no answer)")
    levels: list[LevelResult] = []
    for conc, rc, path, err in runs:
        if rc != 0:
            said = [x for x in err.strip().splitlines() if x.strip()]
            why = redactor.text(said[-1])[:300] if said else f"exit status {rc}"
            if rc == 127:
                why = f"{plan.vllm}: command not found on the node (set [services.acceptance] vllm)"
            return BenchOutcome(ok=False, error=f"vllm bench serve at concurrency {conc} failed: {why}")
        mine = [r for r in records if r.get(FILE_KEY) == path]
        if not mine or not isinstance(mine[-1].get("output_throughput"), int | float) or not mine[-1].get("completed"):
            return BenchOutcome(ok=False, error=f"the result of concurrency {conc} has no output throughput "
                                                f"(all requests failed?)")
        new = mine[-1]
        stamp = str(new.get("date") or "")
        older = [r for r in records if r.get(FILE_KEY) != path and _same_settings(r, plan.model, conc)
                 and isinstance(r.get("output_throughput"), int | float) and r.get("completed")
                 and str(r.get("date") or "") <= stamp]
        prev = max(older, key=lambda r: str(r.get("date") or ""), default=None)
        levels.append(LevelResult(
            concurrency=conc, output_throughput=float(new["output_throughput"]), date=_day(stamp),
            previous=float(prev["output_throughput"]) if prev is not None else None,
            previous_date=_day(prev.get("date")) if prev is not None else None))
    if len(levels) < 2:
        return BenchOutcome(ok=False, error="the benchmark stopped after the single-stream run")
    return BenchOutcome(ok=True, single=levels[0], peak=levels[1])


async def run_acceptance(pool: NodePool, node: Node, service: Service, plan: BenchPlan,
                         key: str | None) -> BenchOutcome:
    """Run both levels on ``node`` (one SSH round trip, up to ``[services.acceptance] timeout``)."""
    redactor = Redactor([key] if key else [])
    if key is not None and ("\n" in key or "\r" in key):
        return BenchOutcome(ok=False, error="the API key I hold contains a line break")
    try:
        result = await pool.run(node, remote_command(build_bench_script(plan)),
                                limit_s=service.acceptance.timeout + node.timeout, stdin=(key or "") + "\n")
    except NodeUnreachable as e:
        return BenchOutcome(ok=False, unreachable=True, error=redactor.text(e.error.reason))
    return parse_bench_output(result.stdout, plan, redactor)


# ------------------------------------------------------------------------------------------------
# Words


def _tps(value: float) -> str:
    return f"{value:,.1f}" if value < 100 else f"{value:,.0f}"


def _pct(change: float) -> str:
    sign = "+" if change >= 0 else MINUS
    return f"{sign}{abs(change):.1f} %"


BenchVerdict = Literal["ok", "regression", "failed"]


def verdict(outcome: BenchOutcome, regression_pct: float) -> BenchVerdict:
    """ok, regression (a level dropped more than ``regression_pct`` against its previous run), or failed."""
    if not outcome.ok:
        return "failed"
    for level in (outcome.single, outcome.peak):
        change = level.change_pct if level is not None else None
        if change is not None and change < -regression_pct:
            return "regression"
    return "ok"


def summary_line(outcome: BenchOutcome) -> str:
    """``82.1 tok/s single-stream, −0.5 % vs 2026-02-21; 1,540 tok/s peak, +0.3 %``."""
    parts: list[str] = []
    shown_date: str | None = None
    for level, what in ((outcome.single, "single-stream"), (outcome.peak, "peak")):
        if level is None:
            continue
        text = f"{_tps(level.output_throughput)} tok/s {what}"
        if what == "peak":
            text += f" (concurrency {level.concurrency})" if level.previous is None else ""
        change = level.change_pct
        if change is None:
            text += ", first run with these settings" if what == "single-stream" else ""
        else:
            text += f", {_pct(change)}"
            if level.previous_date != shown_date:
                text += f" vs {level.previous_date}"
                shown_date = level.previous_date
        parts.append(text)
    return "; ".join(parts)
