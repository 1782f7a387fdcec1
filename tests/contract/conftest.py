"""One store contract, three backends: in memory, SQLite and PostgreSQL.

Every test in this folder that asks for `store` runs once per backend; the SQL
ones are integration tests (real databases, migrated with Alembic).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memory.engine import open_engine
from memory.store import Store
from tests.services import postgres_database
from workers import schema


class Clock:
    """An injected clock: tests move time, never wait for it."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


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
