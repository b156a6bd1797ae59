"""services/store/audit.py: the audit log, newest first, by service."""

from __future__ import annotations

from datetime import UTC

import pytest

from services.store.audit import AuditRepo
from services.store.engine import Database
from tests.unit.services.store.conftest import at


@pytest.fixture
def audit(db: Database) -> AuditRepo:
    return AuditRepo(db)


async def test_audit_listing_filtered_by_service(audit: AuditRepo) -> None:
    await audit.record("request", "U1", "C1", "kimi", "gpu-a", "restart requested", at=at(0), request_id="r1")
    await audit.record("refused", "U2", "C1", "qwen", "gpu-b", "not allowed", at=at(1))
    await audit.record("confirmed", "U3", "C1", "kimi", "gpu-a", "confirmed", at=at(2), request_id="r1")
    entry = await audit.record("startup", None, None, None, None, "bot started")
    assert entry.at.tzinfo is UTC and entry.id > 0
    kimi = await audit.recent("kimi")
    assert [(e.event, e.who, e.where, e.request_id) for e in kimi] == [
        ("confirmed", "U3", "C1", "r1"), ("request", "U1", "C1", "r1")]
    assert [e.event for e in await audit.recent()] == ["startup", "confirmed", "refused", "request"]
    assert [e.event for e in await audit.recent(limit=2)] == ["startup", "confirmed"]
