"""Real services for the integration and acceptance tiers.

A missing PostgreSQL, Redis or RabbitMQ fails the run in CI (CI=true) and skips
loudly elsewhere, naming what was missing and how to point the tests at it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import pytest
import redis
from kombu import Connection
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

POSTGRES_URL = os.environ.get(
    "NIGHTSHIFT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("NIGHTSHIFT_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")
AMQP_URL = os.environ.get("NIGHTSHIFT_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672//")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def unavailable(what: str, error: Exception) -> None:
    message = (
        f"{what} is not reachable ({type(error).__name__}: {error}); "
        "set NIGHTSHIFT_TEST_POSTGRES_URL / NIGHTSHIFT_TEST_REDIS_URL / NIGHTSHIFT_TEST_AMQP_URL"
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


_admin_engine: Engine | None = None
_template: str | None = None
_dropper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="drop-test-db")


def _admin() -> Engine:
    global _admin_engine
    if _admin_engine is None:
        _admin_engine = create_engine(
            make_url(POSTGRES_URL).set(drivername="postgresql+psycopg2"),
            isolation_level="AUTOCOMMIT",
            poolclass=NullPool,
        )
    return _admin_engine


def _url(name: str) -> str:
    return make_url(POSTGRES_URL).set(database=name).render_as_string(hide_password=False)


def _create(name: str, template: str | None = None) -> None:
    clause = f' TEMPLATE "{template}"' if template else ""
    with _admin().connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"{clause}'))


def _drop(name: str) -> None:
    with _admin().connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def _migrated_template() -> str:
    """A database migrated to all heads once per session; tests start as copies of it."""
    global _template
    if _template is None:
        from memory.engine import open_engine
        from workers import schema

        name = f"ns_tpl_{os.getpid()}_{uuid.uuid4().hex[:6]}"
        _create(name)
        engine = open_engine(_url(name))
        schema.upgrade(engine)
        engine.dispose()
        _template = name
        atexit.register(_drop_template)
    return _template


def _drop_template() -> None:
    _dropper.shutdown(wait=True)
    if _template is not None:
        _drop(_template)


@contextmanager
def postgres_database(*, empty: bool = False) -> Iterator[str]:
    """A fresh PostgreSQL database for one test, already migrated (a copy of the
    session's template) unless `empty`; dropped in the background afterwards."""
    postgres_available()
    name = f"ns_test_{uuid.uuid4().hex[:12]}"
    _create(name, None if empty else _migrated_template())
    try:
        yield _url(name)
    finally:
        _dropper.submit(_drop, name)


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


def amqp_available() -> None:
    try:
        with Connection(AMQP_URL, connect_timeout=3) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as error:
        unavailable(f"RabbitMQ at {Connection(AMQP_URL).as_uri()}", error)


@contextmanager
def amqp_vhost(queues: Sequence[str]) -> Iterator[str]:
    """A RabbitMQ URL for one test.

    When the broker is this machine's and `rabbitmqctl` may add a vhost, the URL
    names a fresh one, deleted afterwards with everything in it: nothing the test's
    workers declare or broadcast meets another run's. Otherwise (a broker elsewhere,
    as a CI service may be) it is NIGHTSHIFT_TEST_AMQP_URL itself, and `queues` are
    deleted before and after, as `redis_database` flushes its database.
    """
    amqp_available()
    base = Connection(AMQP_URL)
    vhost = f"ns-test-{uuid.uuid4().hex[:12]}"
    if base.hostname in ("127.0.0.1", "localhost", "::1") and _rabbitmqctl("add_vhost", vhost):
        try:
            if not _rabbitmqctl("set_permissions", "-p", vhost, base.userid, ".*", ".*", ".*"):
                raise RuntimeError(f"rabbitmqctl could not let {base.userid} into {vhost}")
            yield base.clone(virtual_host=vhost).as_uri(include_password=True)
        finally:
            _rabbitmqctl("delete_vhost", vhost)
        return
    _delete_queues(queues)
    try:
        yield AMQP_URL
    finally:
        _delete_queues(queues)


def _rabbitmqctl(*args: str) -> bool:
    if shutil.which("rabbitmqctl") is None:
        return False
    done = subprocess.run(["rabbitmqctl", "-q", *args], capture_output=True, timeout=30)
    return done.returncode == 0


def _delete_queues(queues: Sequence[str]) -> None:
    with Connection(AMQP_URL, connect_timeout=3) as conn:
        for queue in queues:
            conn.default_channel.queue_delete(queue)
