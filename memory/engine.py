"""Opening a database for nightshift: one engine factory for PostgreSQL and SQLite.

SQLite is the embedded store, shared by several processes (run worker, writer,
beat), so its pragmas are explicit: WAL so readers never block the writer, a busy
timeout so a second writer waits instead of failing, foreign keys on, and
`BEGIN IMMEDIATE` for every transaction so two writers serialise at the start of
a transaction rather than deadlocking on a lock upgrade halfway through.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from sqlalchemy import Connection, Engine, create_engine, event, exc
from sqlalchemy.engine import make_url
from tenacity import (
    before_sleep_log,
    retry,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

from memory import folding

log = logging.getLogger(__name__)

SQLITE_PRAGMAS = {
    "journal_mode": "WAL",
    "busy_timeout": "30000",
    "synchronous": "NORMAL",
    "foreign_keys": "ON",
}

T = TypeVar("T")


def open_engine(url: str, *, pool_size: int = 5) -> Engine:
    """An engine for `url` (postgresql:// or sqlite:///path), with nightshift's settings.
    Raises ValueError, saying what is wrong, for a URL it cannot use.

    Its errors name the statement, never its parameters (`hide_parameters`): they
    reach logs, Celery's result backend and tracebacks, where memory content that
    passed the gate (or a secret it refused) would outlive any forget."""
    try:
        parsed = make_url(url)
    except exc.ArgumentError:
        raise ValueError(
            f"database URL {url.split('@')[-1]!r} is not a URL: use postgresql://… or"
            " sqlite:///path"
        ) from None
    if parsed.drivername == "postgres":  # libpq's and Heroku's spelling
        parsed = parsed.set(drivername="postgresql")
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            connect_args={"timeout": 30, "check_same_thread": False},
            hide_parameters=True,
        )
        _configure_sqlite(engine)
        return engine
    if parsed.get_backend_name() == "postgresql":
        if parsed.drivername == "postgresql":
            # SQLAlchemy 2.1 defaults to psycopg 3; nightshift ships psycopg2-binary.
            parsed = parsed.set(drivername="postgresql+psycopg2")
        elif parsed.drivername != "postgresql+psycopg2":
            # The writer sends its batch as one multi-statement string, which psycopg 3
            # refuses ("cannot insert multiple commands into a prepared statement").
            raise ValueError(
                f"database URL {parsed.render_as_string(hide_password=True)} names the"
                f" driver {parsed.get_driver_name()!r}: nightshift talks to PostgreSQL"
                " through psycopg2, installed with it; use postgresql://…"
            )
        engine = create_engine(
            parsed,
            hide_parameters=True,
            pool_size=pool_size,
            max_overflow=pool_size,
            connect_args={"connect_timeout": 5},
        )
        _ping_after_idle(engine)
        _measure_round_trip(engine)
        return engine
    raise ValueError(
        f"unsupported database URL {parsed.render_as_string(hide_password=True)}: "
        "use postgresql://… or sqlite:///path"
    )


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy issue BEGIN itself (see _on_begin); pysqlite's own
        # transaction handling would defer it to the first write.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        for name, value in SQLITE_PRAGMAS.items():
            cursor.execute(f"PRAGMA {name}={value}")
        cursor.close()
        # SQLite's own lower() folds ASCII only: forgetting "JÜRGEN" by text matched
        # nothing and its verification, asking the same way, found nothing left.
        dbapi_connection.create_function("lower", 1, _unicode_lower, deterministic=True)
        folding.register_sqlite(dbapi_connection)  # ns_fold: PostgreSQL's is a SQL function

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")


def _unicode_lower(value: object) -> object:
    return value.lower() if isinstance(value, str) else value


ROUND_TRIP = "ns_round_trip"
"""Where a pooled PostgreSQL connection keeps (in its `info`) its round trip to the
server in seconds, measured as it connected (`memory.sql` decides by it whether a
read is worth a thread)."""


def _measure_round_trip(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        record.info[ROUND_TRIP] = round_trip(dbapi_connection)


def round_trip(dbapi_connection: Any, samples: int = 3) -> float:
    """The fastest of `samples` `SELECT 1` on a DB-API connection, in seconds: the
    network's share of every statement, without the server's work."""
    cursor = dbapi_connection.cursor()
    fastest = float("inf")
    try:
        for _ in range(samples):
            start = time.perf_counter()
            cursor.execute("SELECT 1")
            cursor.fetchone()
            fastest = min(fastest, time.perf_counter() - start)
    finally:
        cursor.close()
    dbapi_connection.rollback()  # not yet in autocommit, the first SELECT began a transaction
    return fastest


PING_AFTER_IDLE_SECONDS = 1.0


def _ping_after_idle(engine: Engine) -> None:
    """Check a pooled connection before use only when it sat idle in the pool.

    `pool_pre_ping` pings on every checkout: a round trip per transaction, which
    for a short run is a sizeable share of its database time. A connection back
    from use under a second ago was alive then; one that idled longer (where a
    server restart or an idle timeout bites) is pinged, and a dead one replaced,
    as pre-ping would. A connection that dies inside that second fails its
    statement with a disconnect error, which invalidates the pool's connections
    and which `retrying()` retries.
    """

    @event.listens_for(engine, "connect")
    def _on_connect(_dbapi_connection: Any, record: Any) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkin")
    def _on_checkin(_dbapi_connection: Any, record: Any) -> None:
        if record is not None:
            record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _on_checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get("idle_since", 0.0)
        if time.monotonic() - idle_since < PING_AFTER_IDLE_SECONDS:
            return
        try:
            cursor = dbapi_connection.cursor()
            cursor.execute("SELECT 1")
            cursor.close()
        except Exception as error:
            # The pool discards this connection and checks out (or opens) another.
            raise exc.DisconnectionError(f"pooled connection is dead: {error}") from error


def _driver_level(error: BaseException) -> bool:
    """A DB-API error raised outside SQLAlchemy's wrapping (e.g. while the pool resets a
    connection the server already closed)."""
    kind = type(error)
    return kind.__name__ in ("OperationalError", "InterfaceError") and kind.__module__.split(".")[
        0
    ] in ("psycopg2", "sqlite3")


def is_transient(error: BaseException) -> bool:
    """A database error worth retrying: a dropped connection, a lock or a serialization failure."""
    if isinstance(error, exc.DBAPIError) and error.connection_invalidated:
        return True
    if isinstance(error, exc.OperationalError | exc.InterfaceError) or _driver_level(error):
        cause = error.orig if isinstance(error, exc.DBAPIError) else error
        text = str(cause if cause is not None else error).lower()
        return any(
            word in text
            for word in (
                "database is locked",
                "could not connect",
                "connection",
                "server closed",
                "terminating connection",
                "deadlock",
                "could not serialize",
            )
        )
    return False


def retrying(attempts: int = 5) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Retry a whole database unit of work on transient errors, with a bound.

    Wrap the function that opens its own transaction, never a statement inside
    one: a retried statement in a broken transaction cannot succeed.
    """
    return retry(
        retry=retry_if_exception(is_transient),
        stop=stop_after_attempt(attempts),
        wait=wait_exponential(multiplier=0.05, max=2.0) + wait_random(0, 0.05),
        before_sleep=before_sleep_log(log, logging.WARNING),
        reraise=True,
    )


_AUTOCOMMIT_SIBLINGS: WeakKeyDictionary[Engine, Engine] = WeakKeyDictionary()


@contextmanager
def autocommit(engine: Engine) -> Iterator[Connection]:
    """A connection whose every statement is its own transaction, for reads that need no
    snapshot across statements and for units of work that are one statement.

    On PostgreSQL it comes from a sibling pool whose connections are in autocommit
    from birth: no BEGIN and COMMIT round trips, and no switching a pooled
    connection in and out of autocommit (psycopg2 pays a round trip for that too).
    On SQLite it is an ordinary `BEGIN IMMEDIATE` transaction. Never use it for two
    statements that must change the database together.
    """
    if engine.dialect.name != "postgresql":
        with engine.begin() as conn:
            yield conn
        return
    with _autocommit_sibling(engine).connect() as conn:
        yield conn


def _autocommit_sibling(engine: Engine) -> Engine:
    sibling = _AUTOCOMMIT_SIBLINGS.get(engine)
    if sibling is None:
        sibling = create_engine(
            engine.url,
            hide_parameters=True,
            isolation_level="AUTOCOMMIT",
            pool_size=engine.pool.size(),  # type: ignore[attr-defined]
            max_overflow=engine.pool._max_overflow,  # type: ignore[attr-defined]
            connect_args={"connect_timeout": 5},
        )
        _ping_after_idle(sibling)
        _measure_round_trip(sibling)
        event.listen(engine, "engine_disposed", lambda _engine: sibling.dispose())
        _AUTOCOMMIT_SIBLINGS[engine] = sibling
    return sibling


def missing_sqlite_file(database_url: str) -> Path | None:
    """The file a SQLite URL names, when it does not exist; None for anything else."""
    try:
        url = make_url(database_url)
    except exc.ArgumentError:
        return None  # `open_engine` says what is wrong with it
    if url.get_backend_name() != "sqlite" or url.database in (None, "", ":memory:"):
        return None
    path = Path(url.database).resolve()
    return None if path.exists() else path


def safe_url(url: str) -> str:
    """The URL as it may be shown to a person: never with its password."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except exc.ArgumentError:
        return "<unparseable database URL>"
