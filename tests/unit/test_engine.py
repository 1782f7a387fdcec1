from __future__ import annotations

import sqlite3

import psycopg2
import pytest
from sqlalchemy import exc

from memory.engine import is_transient, open_engine, safe_url


@pytest.mark.parametrize(
    "error",
    [
        psycopg2.OperationalError("server closed the connection unexpectedly"),
        sqlite3.OperationalError("database is locked"),
        exc.OperationalError("SELECT 1", {}, psycopg2.OperationalError("terminating connection")),
        exc.OperationalError("UPDATE", {}, psycopg2.OperationalError("deadlock detected")),
    ],
)
def test_dropped_connections_and_locks_are_retried(error: BaseException) -> None:
    assert is_transient(error)


@pytest.mark.parametrize(
    "error",
    [
        ValueError("bad input"),
        exc.IntegrityError("INSERT", {}, psycopg2.IntegrityError("duplicate key")),
        exc.OperationalError("SELECT", {}, psycopg2.OperationalError("syntax error at or near")),
    ],
)
def test_real_errors_are_not_retried(error: BaseException) -> None:
    assert not is_transient(error)


def test_safe_url_never_shows_the_password() -> None:
    assert safe_url("postgresql://u:hunter2@db:5432/x") == "postgresql://u:***@db:5432/x"
    assert "hunter2" not in safe_url("postgresql://u:hunter2@")


@pytest.mark.parametrize("driver", ["psycopg", "asyncpg", "pg8000"])
def test_a_postgresql_driver_other_than_psycopg2_is_refused_by_name(driver: str) -> None:
    with pytest.raises(ValueError) as refused:
        open_engine(f"postgresql+{driver}://app:Sup3rS3cret@db/ns")
    message = str(refused.value)
    assert f"names the driver {driver!r}" in message and "use postgresql://" in message
    assert "Sup3rS3cret" not in message


def test_psycopg2_named_or_not_is_taken() -> None:
    for url in ("postgresql://db/ns", "postgres://db/ns", "postgresql+psycopg2://db/ns"):
        assert open_engine(url).dialect.driver == "psycopg2"
