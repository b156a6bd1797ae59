"""Check an understanding corpus against corpus-spec and print its mix.

    python tests/understanding/check_corpus.py tests/understanding/corpus.jsonl [more.jsonl ...]

Every line must parse, carry exactly the spec's fields with the spec's values, use only the demo cluster's
names (kimi, qwen, gpu-a, gpu-b), and arrive as Slack or a terminal would deliver it. Exits 1 on the first
file with a problem, after listing every problem in it. Texts must be unique across all the files given.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from pathlib import Path

INTENTS = {
    "settings", "flag", "status", "throughput", "gpus", "logs", "changes", "compare", "chart_throughput",
    "chart_loads", "chart_bench", "restart", "restarts", "bench", "silence", "unsilence", "unlock", "audit",
    "help", "smalltalk", "unclear",
}
ORDER_INTENTS = {"restart", "bench", "silence", "unsilence", "unlock"}
KINDS = {
    "plain", "readme-like", "multi-sentence", "typo", "jargon", "emoji", "slack-markup", "quote-code",
    "question-vs-order", "hypothetical", "negation", "time-qualifier", "flag-everyday", "env", "model-variant",
    "word-order", "unknown-name", "smalltalk", "multi-question", "lang-de", "lang-es", "lang-fr", "lang-zh",
    "lang-ja", "garbage",
}
FIELDS = ["id", "text", "surface", "intent", "services", "nodes", "args", "order", "unknown", "also_ok", "kind"]
SERVICES = {"kimi", "qwen"}
NODES = {"gpu-a", "gpu-b"}
ARG_TYPES: dict[str, type | tuple[type, ...]] = {
    "flag": str, "env": str, "value": str, "lines": int, "window_s": int, "duration_s": int, "force": bool,
    "negated": bool,
}
# Slack delivers &, < and > as entities; a raw < opens only its own markup (<@U…>, <#C…|x>, <!here>, <http…>).
SLACK_MARKUP = re.compile(r"<(?:@[UW][A-Z0-9]+|#C[A-Z0-9]+(?:\|[^<>]*)?|![a-z^A-Z0-9]+(?:\|[^<>]*)?"
                          r"|(?:https?|mailto):[^<>\s|]+(?:\|[^<>]*)?)>")
ENTITY = re.compile(r"&(?!amp;|lt;|gt;)")
FLAG_NAME = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
ENV_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")


def _args_problems(intent: object, args: object) -> list[str]:
    """What is wrong with a row's args: unknown keys, wrong types, and args that do not go with its intent."""
    out: list[str] = []
    if not isinstance(args, dict):
        out.append("args not an object")
        args = {}
    for k, v in args.items():
        want = ARG_TYPES.get(k)
        if want is None or not isinstance(v, want) or (want is int and isinstance(v, bool)):
            out.append(f"args.{k} = {v!r}")
    if intent == "flag":
        if ("flag" in args) == ("env" in args):
            out.append("flag needs exactly one of args.flag / args.env")
        if "flag" in args and not FLAG_NAME.match(str(args["flag"])):
            out.append(f"args.flag {args['flag']!r} is not a canonical long name without --")
        if "env" in args and not ENV_NAME.match(str(args["env"])):
            out.append(f"args.env {args['env']!r}")
    elif {"flag", "env", "value"} & set(args):
        out.append("args.flag/env/value outside intent flag")
    if "negated" in args and intent != "restarts":
        out.append("args.negated outside restarts")
    if "window_s" in args and intent != "chart_throughput":
        out.append("args.window_s outside chart_throughput")
    if "duration_s" in args and intent != "silence":
        out.append("args.duration_s outside silence")
    if "lines" in args and intent != "logs":
        out.append("args.lines outside logs")
    return out


def _encoding_problems(surface: object, text: str) -> list[str]:
    """Text that Slack or a terminal would not deliver as written."""
    out: list[str] = []
    if surface == "slack":
        bare = SLACK_MARKUP.sub("", text)
        if "<" in bare or ">" in bare:
            out.append("raw < or > in Slack text (Slack sends &lt; &gt;)")
        if ENTITY.search(text):
            out.append("raw & in Slack text (Slack sends &amp;)")
    elif "<@" in text or "&gt;" in text or "&amp;" in text:
        out.append("Slack encoding in a terminal text")
    return out


def problems(row: dict[str, object], prefix: str) -> list[str]:
    """What is wrong with one row (empty when it is right)."""
    out: list[str] = []
    keys = list(row)
    if keys[: len(FIELDS)] != FIELDS or set(keys) - {*FIELDS, "note"}:
        out.append(f"fields {keys} (want {FIELDS} + optional note)")
        return out
    rid, text, intent = row["id"], row["text"], row["intent"]
    if not (isinstance(rid, str) and re.fullmatch(prefix + r"\d{4}", rid)):
        out.append(f"id {rid!r}")
    if not isinstance(text, str) or not text.strip():
        out.append("empty text")
        return out
    if row["surface"] not in {"slack", "terminal"}:
        out.append(f"surface {row['surface']!r}")
    if intent not in INTENTS:
        out.append(f"intent {intent!r}")
    for key, known in (("services", SERVICES), ("nodes", NODES)):
        v = row[key]
        if not isinstance(v, list) or set(v) - known or len(set(v)) != len(v):
            out.append(f"{key} {v!r}")
    unknown = row["unknown"]
    if not isinstance(unknown, list) or any(not isinstance(w, str) or w in SERVICES | NODES for w in unknown):
        out.append(f"unknown {unknown!r}")
    out += _args_problems(intent, row["args"])
    order = row["order"]
    if not isinstance(order, bool) or (order and intent not in ORDER_INTENTS):
        out.append(f"order {order!r} with intent {intent}")
    if intent == "restart" and not order:
        out.append("intent restart must be an order (use restarts)")
    also = row["also_ok"]
    if not isinstance(also, list) or any(a not in INTENTS | {"ask"} or a == intent for a in also):
        out.append(f"also_ok {also!r}")
    kind = row["kind"]
    if not isinstance(kind, list) or not kind or set(kind) - KINDS:
        out.append(f"kind {kind!r}")
    if "note" in row and not (isinstance(row["note"], str) and row["note"]):
        out.append("empty note")
    out += _encoding_problems(row["surface"], text)
    return out


def table(title: str, counts: Counter[str], total: int) -> None:
    """Print one mix table."""
    print(f"\n{title} (n = {total})")
    for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {key:<22} {n:>4}  {100 * n / total:5.1f} %")


def check(path: Path, seen: set[str]) -> bool:
    """Validate one file, print its mix; False when anything is wrong."""
    rows: list[dict[str, object]] = []
    bad: list[str] = []
    for no, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            bad.append(f"{path}:{no}: not JSON ({e})")
            continue
        rows.append(row)
    prefix = str(rows[0]["id"])[0] if rows else "c"
    for no, row in enumerate(rows, 1):
        for p in problems(row, prefix):
            bad.append(f"{path}:{no} {row.get('id')}: {p}")
        if row.get("id") != f"{prefix}{no:04d}":
            bad.append(f"{path}:{no}: id {row.get('id')!r} out of sequence")
        norm = " ".join(str(row.get("text")).lower().split())
        if norm in seen:
            bad.append(f"{path}:{no}: duplicate text {row.get('text')!r}")
        seen.add(norm)
    for b in bad:
        print(b)
    n = len(rows)
    print(f"{path}: {n} messages, {len(bad)} problems")
    if not n:
        return not bad
    intents: Counter[str] = Counter()
    for r in rows:
        key = str(r["intent"])
        if key == "restart":
            key = "restart (order)"
        elif key == "restarts":
            key = "restarts (not an order)"
        elif key == "flag":
            key = "flag (env)" if "env" in r["args"] else "flag (vLLM flag)"  # type: ignore[operator]
        intents[key] += 1
    table("by intent", intents, n)
    table("by kind (a message may have several)", Counter(k for r in rows for k in r["kind"]), n)  # type: ignore[attr-defined]
    table("by surface", Counter(str(r["surface"]) for r in rows), n)
    orders = Counter("order" if r["order"] else "not an order" for r in rows if r["intent"] in {"restart", "restarts"})
    table("restart messages", orders, sum(orders.values()))
    extra: Counter[str] = Counter()
    for r in rows:
        extra.update(k for k in ("also_ok", "unknown", "note") if r.get(k))
    table("with also_ok / unknown names / a note", extra, n)
    return not bad


def main(argv: list[str]) -> int:
    """Check every file named on the command line."""
    if not argv:
        print(__doc__)
        return 2
    seen: set[str] = set()
    ok = all([check(Path(a), seen) for a in argv])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
