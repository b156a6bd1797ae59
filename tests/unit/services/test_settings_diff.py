"""services/settings_diff.py: what changed between two sets of settings, flag by flag and variable by variable."""

from __future__ import annotations

from services.settings_diff import DiffItem, diff_snapshots
from tests.unit.services.store.conftest import state


def test_diff_added_removed_and_unchanged() -> None:
    old = state(flags={"a": "1", "b": True, "c": ["x"]}, env={"E": "1"})
    new = state(flags={"b": True, "c": ["x", "y"], "d": "4"}, env={}, version=None)
    assert [(d.kind, d.key, d.old, d.new) for d in diff_snapshots(old, new)] == [
        ("version", "version", "0.11.0", None),
        ("flag", "a", "1", None),
        ("flag", "c", ["x"], ["x", "y"]),
        ("flag", "d", None, "4"),
        ("env", "E", "1", None),
    ]
    assert diff_snapshots(old, old) == []
    assert DiffItem(kind="flag", key="a", old="1").model_dump() == {
        "kind": "flag", "key": "a", "old": "1", "new": None}
