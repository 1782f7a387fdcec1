"""Real services for the integration and acceptance tiers.

A missing PostgreSQL or Redis fails the run in CI (CI=true) and skips loudly
elsewhere, naming what was missing and how to point the tests at it.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

POSTGRES_URL = os.environ.get(
    "NIGHTSHIFT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("NIGHTSHIFT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(what: str, error: Exception) -> None:
    message = (
        f"{what} is not reachable ({type(error).__name__}: {error}); "
        f"set NIGHTSHIFT_TEST_POSTGRES_URL / NIGHTSHIFT_TEST_REDIS_URL"
    )
    if IN_CI:
        pytest.fail(f"CI needs {message}", pytrace=False)
    pytest.skip(f"SKIPPED LOUDLY: {message}")


def postgres_available() -> None:
    try:
        engine = create_engine(
            make_url(POSTGRES_URL).set(drivername="postgresql+psycopg2"),
            connect_args={"connect_timeout": 3},
        )
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        engine.dispose()
    except Exception as error:  # any failure to connect means "not available"
        unavailable(f"PostgreSQL at {make_url(POSTGRES_URL).render_as_string()}", error)


def redis_available() -> None:
    try:
        redis.Redis.from_url(REDIS_URL, socket_connect_timeout=3).ping()
    except Exception as error:
        unavailable(f"Redis at {REDIS_URL}", error)


@contextmanager
def postgres_database() -> Iterator[str]:
    """A fresh, empty PostgreSQL database for one test; dropped afterwards."""
    postgres_available()
    name = f"ns_test_{uuid.uuid4().hex[:12]}"
    admin = create_engine(
        make_url(POSTGRES_URL).set(drivername="postgresql+psycopg2"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def redis_database() -> Iterator[str]:
    """A Redis database number for one test, flushed before and after."""
    redis_available()
    client = redis.Redis.from_url(REDIS_URL)
    client.flushdb()
    try:
        yield REDIS_URL
    finally:
        client.flushdb()
        client.close()
