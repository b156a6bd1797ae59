"""What changed between two sets of settings (a stored snapshot or a live ``ServiceState``): pure, no I/O."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict

from services.models import FlagValue

DiffKind = Literal["flag", "env", "model", "version"]


class DiffItem(BaseModel):
    """One difference between two sets of settings (``old`` is None when added, ``new`` when removed)."""

    model_config = ConfigDict(extra="ignore")

    kind: DiffKind
    key: str
    old: FlagValue | None = None
    new: FlagValue | None = None


class SettingsLike(Protocol):
    """Anything with settings (a stored ``SettingsSnapshot`` or a ``ServiceState``) can be diffed."""

    @property
    def model(self) -> str | None: ...
    @property
    def version(self) -> str | None: ...
    @property
    def flags(self) -> Mapping[str, FlagValue]: ...
    @property
    def env(self) -> Mapping[str, str]: ...


def diff_snapshots(old: SettingsLike, new: SettingsLike) -> list[DiffItem]:
    """What differs from ``old`` to ``new``: model, version, then each flag and env key (sorted).

    A key only in ``new`` is reported with ``old=None`` (added); only in ``old`` with ``new=None``
    (removed). Pure: no database access.
    """
    out: list[DiffItem] = []
    if old.model != new.model:
        out.append(DiffItem(kind="model", key="model", old=old.model, new=new.model))
    if old.version != new.version:
        out.append(DiffItem(kind="version", key="version", old=old.version, new=new.version))
    kind: DiffKind
    for kind, a, b in (("flag", old.flags, new.flags), ("env", old.env, new.env)):
        for key in sorted(set(a) | set(b)):
            va, vb = a.get(key), b.get(key)
            if va != vb or (key in a) != (key in b):
                out.append(DiffItem(kind=kind, key=key, old=va, new=vb))
    return out
