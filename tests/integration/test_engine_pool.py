"""Pooled PostgreSQL connections that died while idle are replaced before use."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine, text

from memory import engine as engine_module
from memory.engine import autocommit, open_engine, retrying
from tests.services import postgres_database

pytestmark = pytest.mark.integration


def kill_one_pooled_connection(engine: Engine) -> None:
    """Two connections in the pool; the second terminates the first's server process."""
    with engine.connect() as a, engine.connect() as b:
        victim = a.execute(text("SELECT pg_backend_pid()")).scalar_one()
        a.commit()  # `a` goes back to the pool idle, as a finished unit of work leaves it
        b.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": victim})


@pytest.fixture
def engine() -> Iterator[Engine]:
    with postgres_database() as url:
        engine = open_engine(url, pool_size=2)
        yield engine
        engine.dispose()


def test_a_connection_that_died_while_idle_is_pinged_and_replaced(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    kill_one_pooled_connection(engine)
    monkeypatch.setattr(engine_module, "PING_AFTER_IDLE_SECONDS", 0.0)  # as if idle for long
    for _ in range(4):  # every checkout is pinged: the dead one is never handed out
        with engine.connect() as conn:
            assert conn.execute(text("SELECT 1")).scalar_one() == 1


def test_a_connection_that_died_just_now_fails_once_and_the_retry_succeeds(
    engine: Engine,
) -> None:
    kill_one_pooled_connection(engine)
    calls = []

    @retrying()
    def work() -> int:
        calls.append(1)
        with engine.connect() as conn:
            value: int = conn.execute(text("SELECT 41 + 1")).scalar_one()
        return value

    assert [work() for _ in range(4)] == [42] * 4  # both pooled connections get handed out
    assert len(calls) == 5  # the dead one failed once; the pool then replaced them all


def test_autocommit_units_commit_each_statement_from_their_own_pool(engine: Engine) -> None:
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE probe (n integer)"))
    with autocommit(engine) as conn:
        conn.execute(text("INSERT INTO probe VALUES (1)"))
        assert conn.connection.dbapi_connection.autocommit is True  # type: ignore[union-attr]
    with engine.connect() as conn:  # the ordinary pool: transactions as before
        assert conn.execute(text("SELECT count(*) FROM probe")).scalar_one() == 1
        assert conn.connection.dbapi_connection.autocommit is False  # type: ignore[union-attr]
    sibling = engine_module._AUTOCOMMIT_SIBLINGS[engine]
    assert sibling.pool.checkedin() == 1
    engine.dispose()  # disposing the engine disposes its autocommit pool too
    assert sibling.pool.checkedin() == 0
