"""The handlers' unit tests that need a store run on a SQLite file and on a real PostgreSQL (the store's ``url``)."""

from tests.unit.services.store.conftest import url

__all__ = ["url"]
