from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.services import postgres_database


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Each test that asks for it runs on embedded SQLite and on real PostgreSQL.

    The PostgreSQL database starts migrated; SQLite starts empty (migrating it is cheap).
    """
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    with postgres_database() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_database_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Like `database_url`, but the database has no tables at all (for migration tests)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'empty.db'}"
        return
    with postgres_database(empty=True) as url:
        yield url
