"""One store contract, three backends: in memory, SQLite and PostgreSQL.

Every test in this folder that asks for `store` runs once per backend; the SQL
ones are integration tests (real databases, migrated with Alembic).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memory.engine import open_engine
from memory.store import Store
from tests.clock import Clock
from tests.services import postgres_database
from workers import schema


@pytest.fixture
def clock() -> Clock:
    return Clock()


BACKENDS = [
    pytest.param("memory", id="memory"),
    pytest.param("sqlite", id="sqlite", marks=pytest.mark.integration),
    pytest.param("postgresql", id="postgresql", marks=pytest.mark.integration),
]


@pytest.fixture(params=BACKENDS)
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Iterator[Store]:
    if request.param == "memory":
        yield Store.in_memory(clock=clock)
        return
    if request.param == "sqlite":
        engine = open_engine(f"sqlite:///{tmp_path / 'store.db'}")
        schema.upgrade(engine)
        yield Store(engine, clock=clock)
        engine.dispose()
        return
    with postgres_database() as url:
        engine = open_engine(url)
        schema.upgrade(engine)
        yield Store(engine, clock=clock)
        engine.dispose()
