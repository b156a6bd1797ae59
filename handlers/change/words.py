"""The words of a settings change: its notices (a contract, like the load notices: extend, never reword) and
``data.change``, the same object in the ``change``/``revert`` answers and in ``changes``' ``settings_changes``."""

from __future__ import annotations

from datetime import datetime

from config.models import Service
from handlers.common import fmt_duration
from handlers.notice_words import hhmm
from handlers.reply import Reply, Section, Status
from services.parse.vllm_args import format_flag_value
from services.store.records import ChangeRecord, ChangeStep, ConfirmableRequest

FINAL_STEPS = frozenset({"kept", "rolled_back", "rollback_failed", "failed", "skipped"})
ROLLING_BACK = frozenset({"rolling_back", "unapplying", "restoring", "rolled_back", "rollback_failed"})
"""The steps whose change failed and whose previous settings were (being) restored."""
_REQUEST_SAYS = {"pending": "pending", "cancelled": "cancelled", "expired": "expired", "refused": "refused",
                 "failed": "interrupted"}  # a claim that refuses moves the change itself to refused


def label(ch: ChangeRecord) -> str:
    """``change #12``."""
    return f"change #{ch.number}"


def _on(ch: ChangeRecord, step: ChangeStep) -> str:
    """`` on gpu-b`` when the change has several nodes (a one-node change names only the service)."""
    return f" on {step.node}" if len(ch.steps) > 1 else ""


def diff_line(ch: ChangeRecord) -> str:
    """``--max-num-seqs 128 → 256; NCCL_PROTO (unset) → Simple`` (redacted when it was stored)."""
    return "; ".join(f"{'--' if d.get('kind') == 'flag' else ''}{d.get('key')} "
                     f"{format_flag_value(d.get('old'), '(unset)')} → {format_flag_value(d.get('new'), '(unset)')}"
                     for d in ch.diff) or "no difference"


def diff_rows(ch: ChangeRecord) -> list[list[str]]:
    """The diff as table rows: what, name, before, after."""
    return [[str(d.get("kind")), str(d.get("key")), format_flag_value(d.get("old"), "(unset)"),
             format_flag_value(d.get("new"), "(unset)")] for d in ch.diff]


def _notice(text: str, status: Status, kind: str, ch: ChangeRecord, node: str, sections: list[Section] | None = None
            ) -> Reply:
    return Reply(intent="notice", title=text.split(" ", 1)[1], status=status, sections=sections or [],
                 data={"notice": text, "kind": kind, "change": ch.number, "request_id": ch.id, "service": ch.service,
                       "node": node})


def settings_of(ch: ChangeRecord, step: ChangeStep) -> str:
    """When the settings a rollback goes back to were started (``14:02 UTC``)."""
    return hhmm(step.settings_since or ch.created_at)


def failed_notice(ch: ChangeRecord, step: ChangeStep) -> Reply:
    """``❌ change #12 on kimi failed: <reason> — ↩️ rolling back to the settings of 14:02 UTC`` (or, when nothing
    was rolled back, why not)."""
    on = _on(ch, step)
    reason = (f"on {step.node}, " if on else "") + (step.reason or "it failed")
    if step.state in ROLLING_BACK:
        tail = f"↩️ rolling back to the settings of {settings_of(ch, step)}"
    else:
        tail = step.detail or "nothing was rolled back"
    text = f"❌ {label(ch)} on {ch.service} failed: {reason} — {tail}"
    tries = Section(kind="text", title="What to try", text=f"`logs {ch.service}` for the whole story; `changes "
                                                           f"{ch.service}` for the history of its settings")
    return _notice(text, "error", "change.failed", ch, step.node, [tries])


def back_notice(ch: ChangeRecord, step: ChangeStep) -> Reply:
    """``✅ kimi is back on its previous settings — loaded in 29m 14s``."""
    text = (f"✅ {ch.service}{_on(ch, step)} is back on its previous settings — loaded in "
            f"{fmt_duration(step.back_s or 0.0)}")
    return _notice(text, "ok", "change.rolled_back", ch, step.node)


def rollback_failed_notice(ch: ChangeRecord, step: ChangeStep) -> Reply:
    """One ❌ naming what is on disk and the command that restores by hand."""
    text = f"❌ {label(ch)} on {ch.service}: rolling back{_on(ch, step)} failed — {step.detail or 'see the audit log'}"
    return _notice(text, "error", "change.rollback_failed", ch, step.node)


def kept_notice(ch: ChangeRecord, service: Service, smoke_passed: bool = True) -> Reply:
    """``✅ change #12 on kimi kept — verified for 10m 00s: …`` (a revert: back on the operator's unit).

    ``smoke_passed``: False when a node's smoke completion did not run (the notice does not claim it)."""
    skipped = service.readiness.smoke and not smoke_passed
    checks = ["ready (the smoke completion was skipped)" if skipped else "ready",
              "the smoke completion" if service.readiness.smoke and smoke_passed else None,
              f"the acceptance benchmark within {service.acceptance.regression_pct:g} %"
              if service.acceptance.bench and service.bench_dir else None,
              "no crash, unhealthy or hung notice"]
    nodes = [s.node for s in ch.steps]
    on = f" on {', '.join(nodes)}" if len(nodes) > 1 else ""
    how = f"verified for {fmt_duration(service.changes.verify_window)}{on}: {', '.join(c for c in checks if c)}"
    if ch.op == "revert":
        text = f"✅ {ch.service} is back on the operator's unit ({label(ch)}: inferbot's drop-in removed) — {how}"
    else:
        text = f"✅ {label(ch)} on {ch.service} kept — {how}"
    return _notice(text, "ok", "change.kept", ch, ch.node)


def stopped_notice(ch: ChangeRecord) -> Reply:
    """A change of several nodes that stopped at its first failure: where it is kept, rolled back, not applied."""
    by: dict[str, list[str]] = {}
    for s in ch.steps:
        by.setdefault({"kept": "kept", "rolled_back": "rolled back", "rollback_failed": "the rollback failed",
                       "skipped": "not applied"}.get(s.state, s.state), []).append(s.node)
    where = "; ".join(f"{what} on {', '.join(nodes)}" for what, nodes in by.items())
    text = f"❌ {label(ch)} on {ch.service} stopped at its first failure: {where}"
    return _notice(text, "error", "change.stopped", ch, ch.node)


def outcome_line(ch: ChangeRecord, state: str) -> str:
    """The change's last word, in the history."""
    failed = next((s for s in ch.steps if s.reason), None)
    why = f": {failed.reason}" if failed is not None else ""
    return {"kept": "kept", "reverted": "reverted to the operator's unit", "rolled_back": f"rolled back{why}",
            "rollback_failed": f"the rollback failed{why}", "failed": f"failed{why}"}.get(state, state)


def shown_state(ch: ChangeRecord, req: ConfirmableRequest | None) -> str:
    """The change's state as people see it: a proposed change is as its request (pending, cancelled…)."""
    if ch.state == "proposed":
        return _REQUEST_SAYS.get(req.state, "confirmed") if req is not None else "pending"
    return ch.state


def _iso(at: datetime | None) -> str | None:
    return at.isoformat() if at is not None else None


def change_data(ch: ChangeRecord, req: ConfirmableRequest | None) -> dict[str, object]:
    """``data.change``: what was asked, the preflight, where it is and how it ended (all redacted)."""
    started = req.confirmed_at if req is not None and req.confirmed_at else None
    took = (ch.finished_at - started).total_seconds() if ch.finished_at and started else None
    return {
        "id": ch.number, "request_id": ch.id, "op": ch.op, "service": ch.service, "node": ch.node,
        "nodes": [s.node for s in ch.steps], "diff": ch.diff, "preflight": ch.preflight,
        "checked_with": ch.checked_with, "state": shown_state(ch, req), "outcome": ch.outcome,
        "requested_by": ch.requested_by, "confirmed_by": req.confirmed_by if req is not None else None,
        "created_at": _iso(ch.created_at), "finished_at": _iso(ch.finished_at),
        "duration_s": round(took, 1) if took is not None else None,
        "steps": [{"node": s.node, "state": s.state, "reason": s.reason, "load_s": s.load_s, "back_s": s.back_s,
                   "ready_at": _iso(s.ready_at)} for s in ch.steps],
    }


def refused_data(op: str, service: str, node: str, reason: str, preflight: list[dict[str, object]] | None = None,
                 **more: object) -> dict[str, object]:
    """``data.change`` of a change refused before it got a number (who may, where, a typo): the same keys."""
    return {"id": None, "request_id": None, "op": op, "service": service, "node": node, "nodes": [node], "diff": [],
            "preflight": preflight or [], "checked_with": "", "state": "refused", "outcome": reason,
            "requested_by": None, "confirmed_by": None, "created_at": None, "finished_at": None, "duration_s": None,
            "steps": [], **more}
