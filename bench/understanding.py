"""How well the router understands people: accuracy on the understanding corpus, by intent and by kind.

``python -m bench.understanding`` prints a markdown table and writes it to ``bench/results/understanding.md``.
Each message is read the way its surface delivers it: a Slack message through the Slack markup reading the
live app uses (``markup.read(text, "slack")``), a terminal one as typed. A message is right when the
intent (or an ``also_ok`` one, or a question back where ``also_ok`` has ``"ask"``), the names it targets
and the unknown names are all right. Orders are counted apart: a message that is not an order must never
reach a confirmation.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from bot.router import route
from bot.understanding.markup import Surface, read
from bot.understanding.names import service_aliases
from config.loader import load_config
from config.models import BotConfig

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "understanding" / "corpus.jsonl"
CLUSTER = ROOT / "tests" / "understanding" / "cluster.toml"
RESULTS = ROOT / "bench" / "results" / "understanding.md"
ORDERS = frozenset({"restart", "bench", "silence", "unsilence", "unlock"})
# What the demo cluster's nodes report as each service's served model names and model path (the corpus
# spec's cluster description): what the probe of the question itself teaches a fresh bot.
SERVED = {("kimi", "gpu-a"): ["kimi-k2.5", "/shared/kimi-k2.5-int4"], ("qwen", "gpu-b"): ["Qwen/Qwen3-32B"]}
BOT_USER_ID = "U0BOT"  # the corpus's app mentions are <@U0BOT>
ARG_KEYS = ("flag", "env", "value", "lines", "window_s", "duration_s", "force", "negated")


@dataclass
class Outcome:
    """One corpus message and what the router made of it."""

    row: dict[str, object]
    intent: str
    asked: bool
    services: list[str]
    nodes: list[str]
    unknown: list[str]
    order: bool  # it would lead to a confirmation
    args: dict[str, object]
    intent_ok: bool = False
    targets_ok: bool = False
    args_ok: bool = False

    @property
    def ok(self) -> bool:
        return self.intent_ok and self.targets_ok

    @property
    def false_order(self) -> bool:
        return self.order and not self.row["order"]


@dataclass
class Results:
    """Every outcome, and the tallies the table shows."""

    outcomes: list[Outcome] = field(default_factory=list)

    def accuracy(self, pick: list[Outcome] | None = None) -> float:
        got = pick if pick is not None else self.outcomes
        return sum(o.ok for o in got) / len(got) if got else 0.0

    @property
    def false_orders(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.false_order]

    def failures(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.ok or o.false_order]


def load_rows(path: Path = CORPUS) -> list[dict[str, object]]:
    """The corpus, one dict per message."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def config() -> BotConfig:
    """The demo cluster the corpus is written against."""
    return load_config(str(CLUSTER))


def _args(reading_args: dict[str, object]) -> dict[str, object]:
    out = {k: v for k, v in reading_args.items() if k in ARG_KEYS and v not in (None, False, "")}
    return out


def judge(row: dict[str, object], cfg: BotConfig) -> Outcome:
    """Route one corpus message and compare it with its label."""
    surface: Surface = "slack" if row["surface"] == "slack" else "terminal"
    aliases = service_aliases(cfg, SERVED)
    r = route(read(str(row["text"]), surface, BOT_USER_ID if surface == "slack" else None), cfg, aliases)
    args = _args(r.args.model_dump())
    if r.command.name == "flag" or r.intent == "flag":
        args.pop("focus", None)
    # A question back between two readings answers neither (right only where the label allows asking); an
    # order in doubt answers the information about it, with the question first.
    only_asked = r.asked and r.note is None
    out = Outcome(row=row, intent=r.intent if r.matched else "unclear", asked=r.asked,
                  services=sorted(r.named_services), nodes=sorted(r.named_nodes), unknown=sorted(r.unknown),
                  order=r.command.confirm and not r.asked and r.matched, args=args)
    also = list(row.get("also_ok") or [])  # type: ignore[call-overload]
    out.intent_ok = ((out.intent == row["intent"] or out.intent in also) and not only_asked) or (
        out.asked and "ask" in also)
    out.targets_ok = (out.services == sorted(row["services"]) and out.nodes == sorted(row["nodes"])  # type: ignore[call-overload]
                      and out.unknown == sorted(row["unknown"]))  # type: ignore[call-overload]
    want = {k: v for k, v in dict(row["args"]).items() if v not in (None, False, "")}  # type: ignore[call-overload]
    out.args_ok = all(args.get(k) == v for k, v in want.items())
    return out


def evaluate(rows: list[dict[str, object]] | None = None) -> Results:
    """Judge every corpus message."""
    cfg = config()
    return Results([judge(row, cfg) for row in (rows if rows is not None else load_rows())])


def _table(title: str, groups: dict[str, list[Outcome]]) -> list[str]:
    lines = [f"| {title} | messages | slack | terminal | right | accuracy |", "|---|---:|---:|---:|---:|---:|"]
    for key in sorted(groups, key=lambda k: (-len(groups[k]), k)):
        got = groups[key]
        slack = [o for o in got if o.row["surface"] == "slack"]
        term = [o for o in got if o.row["surface"] != "slack"]
        right = sum(o.ok for o in got)
        lines.append(f"| {key} | {len(got)} | {len(slack)} | {len(term)} | {right} | {right / len(got):.1%} |")
    return lines


def report(results: Results) -> str:
    """The markdown report: totals, by surface, by intent, by kind of phrasing."""
    out = results.outcomes
    slack = [o for o in out if o.row["surface"] == "slack"]
    term = [o for o in out if o.row["surface"] != "slack"]
    non_orders = [o for o in out if not o.row["order"]]
    lines = [
        "# Understanding: the router on the corpus",
        "",
        f"Corpus: `tests/understanding/corpus.jsonl`, {len(out)} messages ({len(slack)} Slack, {len(term)} terminal).",
        "A message is right when its intent, the names it targets and the unknown names are right.",
        "",
        "| | messages | right | accuracy |",
        "|---|---:|---:|---:|",
        f"| all | {len(out)} | {sum(o.ok for o in out)} | {results.accuracy():.1%} |",
        f"| Slack | {len(slack)} | {sum(o.ok for o in slack)} | {results.accuracy(slack):.1%} |",
        f"| terminal | {len(term)} | {sum(o.ok for o in term)} | {results.accuracy(term):.1%} |",
        f"| arguments right (flag, env, value, lines, window, duration, force, negated) | {len(out)} | "
        f"{sum(o.args_ok for o in out)} | {sum(o.args_ok for o in out) / max(1, len(out)):.1%} |",
        "",
        f"Messages that are not orders: {len(non_orders)}; of them led to a confirmation (restart, bench, silence, "
        f"unsilence, unlock): **{len(results.false_orders)}**.",
        "",
    ]
    by_intent: dict[str, list[Outcome]] = defaultdict(list)
    by_kind: dict[str, list[Outcome]] = defaultdict(list)
    for o in out:
        by_intent[str(o.row["intent"])].append(o)
        for k in o.row["kind"]:  # type: ignore[attr-defined]
            by_kind[str(k)].append(o)
    lines += ["## By intent", "", *_table("intent", by_intent), "", "## By kind of phrasing", "",
              *_table("kind", by_kind), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Print the report (``--failures``: also every message it got wrong) and write it to bench/results."""
    args = argv if argv is not None else sys.argv[1:]
    results = evaluate()
    text = report(results)
    print(text)
    if "--failures" in args:
        for o in results.failures():
            print(f"{o.row['id']} {o.row['surface']:8} {str(o.row['text'])[:90]!r}\n   want {o.row['intent']} "
                  f"{o.row['services']}{o.row['nodes']} unk={o.row['unknown']} also={o.row['also_ok']} "
                  f"args={o.row['args']}\n   got  {o.intent}{'(asked)' if o.asked else ''} {o.services}{o.nodes} "
                  f"unk={o.unknown} order={o.order} args={o.args}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
