"""Fixtures shared by the integration tests: a migrated database on each dialect
(`database_url` runs every test on SQLite and on PostgreSQL), one on PostgreSQL
alone (`pg_engine`), and a store over it with an injected clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from memory.engine import open_engine
from memory.store import Store
from tests.clock import Clock
from tests.services import postgres_database
from workers import schema


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = open_engine(database_url)
    schema.upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def store(engine: Engine, clock: Clock) -> Store:
    return Store(engine, clock=clock)


@pytest.fixture
def pg_engine() -> Iterator[Engine]:
    """A migrated PostgreSQL database alone, for what only it has (prepared statements,
    the writer's one-statement apply)."""
    with postgres_database() as url:
        engine = open_engine(url)
        schema.upgrade(engine)
        yield engine
        engine.dispose()
