"""App Home dashboards people opened: who, when, when last published (pacing) and whether stale."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy import Connection, or_, select, update

from services.store.engine import Repository, aware, in_thread, reading, update_row, upsert, writing
from services.store.ports import HomeViews
from services.store.schema import home_views

__all__ = ["HomeViewsRepo"]


class HomeViewsRepo(Repository, HomeViews):
    """:class:`~services.store.ports.HomeViews` on the ``inferbot_home_views`` table."""

    @in_thread
    def opened(self, user_id: str, at: datetime) -> None:
        upsert(self.db, home_views, {"user_id": user_id}, {"opened_at": aware(at, "at"), "dirty": True})

    @writing
    def mark_dirty(self, conn: Connection, opened_since: datetime) -> int:
        since = aware(opened_since, "opened_since")
        return int(conn.execute(update(home_views).where(home_views.c.opened_at >= since)
                                .values(dirty=True)).rowcount)

    @reading
    def due(self, conn: Connection, now: datetime, min_interval_s: float, opened_since: datetime) -> list[str]:
        cutoff = aware(now, "now") - timedelta(seconds=min_interval_s)
        rows = conn.execute(select(home_views.c.user_id).where(
            home_views.c.dirty.is_(True), home_views.c.opened_at >= aware(opened_since, "opened_since"),
            or_(home_views.c.published_at.is_(None), home_views.c.published_at <= cutoff),
        ).order_by(home_views.c.user_id)).all()
        return [str(r.user_id) for r in rows]

    @writing
    def claim_publish(self, conn: Connection, user_id: str, now: datetime, min_interval_s: float,
                      force: bool = False) -> bool:
        now = aware(now, "now")
        query = update(home_views).where(home_views.c.user_id == user_id)
        if not force:
            cutoff = now - timedelta(seconds=min_interval_s)
            query = query.where(or_(home_views.c.published_at.is_(None), home_views.c.published_at <= cutoff))
        return conn.execute(query.values(published_at=now, dirty=False)).rowcount == 1

    @in_thread
    def publish_failed(self, user_id: str) -> None:
        update_row(self.db, home_views, {"user_id": user_id}, {"dirty": True, "published_at": None})
