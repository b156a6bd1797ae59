"""``inferbot check``: the config is valid and every node answers — or exactly what is wrong and how to fix it."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC

from tabulate import tabulate

from bot.app import runtime
from bot.terminal import shown
from config.models import BotConfig
from handlers.reply import Reply, Section
from services.models import ServiceState
from services.node.probe import ProbeOptions

CHECK_PROBE = ProbeOptions(journal_lines=5)
SUDOERS_HINT = "allow it with the sudoers line in the README (base64 of /proc/*/environ only)"


def _service_problems(st: ServiceState) -> list[tuple[str, str]]:
    problems: list[tuple[str, str]] = []
    if st.reason and st.reason_kind == "unit-not-found":
        problems.append((st.reason, f"check `unit` for {st.service} in the config "
                                    "(`systemctl list-units --all 'vllm*'` on the node)"))
    for w in st.warnings:
        kind = st.warning_kinds.get(w)
        if kind == "environ-denied":
            problems.append(("no permission to read the running process's environment (/proc)", SUDOERS_HINT))
        elif kind == "gpu-query-failed":
            problems.append((w, "install the NVIDIA driver utilities, or ignore on CPU-only nodes"))
        elif kind == "envfile-unreadable":
            problems.append((w, SUDOERS_HINT))
    return problems


async def run_check(config: BotConfig, as_json: bool) -> int:
    """Probe every node once; print a per-node verdict. Exit 0 when all is well, 1 otherwise."""
    rows: list[list[str]] = []
    results: list[dict[str, object]] = []
    async with runtime(config, with_store=False) as rt:
        snap = await rt.cluster.snapshot(config.services, config.nodes, CHECK_PROBE)
    for n in snap.nodes:
        if not n.ok and n.error:
            rows.append([n.node, "FAIL", n.error.reason, n.error.fix])
            results.append({"node": n.node, "ok": False, "problems": [{"what": n.error.reason, "fix": n.error.fix}]})
            continue
        problems: list[tuple[str, str]] = []
        services = [s for s in snap.services if s.node == n.node]
        for st in services:
            problems += [(f"{st.service}: {what}", fix) for what, fix in _service_problems(st)]
        if n.discovered is not None:
            found = ", ".join(n.discovered) or "none"
            detail = f"reached in {n.elapsed_s:.2f}s; discovered vLLM units: {found}"
        else:
            detail = f"reached in {n.elapsed_s:.2f}s; " + ", ".join(f"{s.service} {s.state}" for s in services)
        if problems:
            for what, fix in problems:
                rows.append([n.node, "FAIL", what, fix])
        else:
            rows.append([n.node, "OK", detail, ""])
        results.append({"node": n.node, "ok": not problems, "detail": detail,
                        "problems": [{"what": w, "fix": f} for w, f in problems]})
    state = await check_state(config)
    ok = all(bool(r["ok"]) for r in results) and bool(state["ok"])
    if as_json:
        print(json.dumps({"intent": "check", "ok": ok, "config": config.source, "nodes": results, "state": state},
                         indent=2))
    else:
        n_nodes, n_services = len(config.nodes), len(config.services)
        # Reasons and warnings quote what nodes said: control characters shown, never obeyed (bot.terminal).
        print(shown(f"config {config.source}: valid ({n_nodes} node{'s' * (n_nodes != 1)}, "
                    f"{n_services} service{'s' * (n_services != 1)})"))
        print(shown(f"state: {state['line']}"))
        if rows:
            print(tabulate([[shown(c) for c in r] for r in rows], headers=["node", "result", "detail", "fix"],
                           tablefmt="simple"))
    return 0 if ok else 1


async def check_state(config: BotConfig) -> dict[str, object]:
    """The state store: where it is, its schema version against this inferbot's, and (PostgreSQL) who leads.

    Reads only: nothing is created or upgraded (``serve`` does that on start).
    """
    import psycopg
    from sqlalchemy.exc import DBAPIError

    from bot.app import open_store
    from bot.replicas import store_problem
    from services.store.leader import current_leader

    store = await asyncio.to_thread(open_store, config)  # reads INFERBOT_DB_PASSWORD_FILE: off the event loop
    out: dict[str, object] = {"store": store.describe(), "backend": "postgresql" if store.is_postgres else "sqlite"}
    try:
        current, head = await store.schema_status()
        out.update(schema=current, schema_head=head)
        if current == head:
            schema = f"schema {current} (up to date)"
        elif current is None:
            schema = f"schema not created yet (the first `inferbot serve` creates {head})"
        else:
            schema = f"schema {current} (`inferbot serve` upgrades it to {head})"
        ok = True
        if current is not None and current > head:
            ok, schema = False, (f"schema {current} is newer than this inferbot knows ({head}): upgrade inferbot "
                                 "on this host")
        line = f"{store.describe()} — {schema}"
        if store.is_postgres:
            leader = await current_leader(store.sqlalchemy_url)
            out["leader"] = None if leader is None else leader.replica
            if leader is None:
                line += "; no leader (no `inferbot serve` is running on this database)"
            else:
                since = f" since {leader.since.astimezone(UTC):%Y-%m-%d %H:%M} UTC" if leader.since else ""
                line += f"; leader {leader.replica}{since}"
        else:
            out["leader"] = "this host (SQLite: one process, always the leader)"
        out.update(ok=ok, line=line)
    except (DBAPIError, OSError, psycopg.Error) as e:
        out.update(ok=False, line=f"FAIL {store_problem(store, e)}")
    finally:
        await store.close()
    return out


def check_reply(rows: list[list[str]]) -> Reply:
    """The check as a Reply (for a future Slack command)."""
    table = Section(kind="table", headers=["node", "result", "detail", "fix"], rows=rows)
    return Reply(intent="check", title="Config check", sections=[table])
