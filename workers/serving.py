"""Which database a process serves, so that `nightshift status` can tell a worker
started against another database from one that serves this deployment.

A worker started without `NIGHTSHIFT_DATABASE_URL` serves the embedded SQLite file
while the CLI reads PostgreSQL; it answers pings all the same, and the runs it
records and the memories it writes land where nobody looks. Each worker answers
the inspect command `COMMAND` with the database it serves, and `workers.health`
compares that with its own.

Two URLs can name one database (`localhost` and `127.0.0.1`, a pooler in front),
so the comparison is of what the server says it is: PostgreSQL's cluster
identifier (`pg_control_system()`, readable by any role) and the database's
name; for SQLite, the file's real path.
"""

from __future__ import annotations

import os
from typing import Any

from celery.worker.control import inspect_command
from sqlalchemy import Engine, exc

from memory.engine import open_engine, safe_url

COMMAND = "nightshift_database"


def identity(engine: Engine) -> str:
    """What the database behind `engine` is, the same text whatever URL reached it."""
    if engine.dialect.name == "sqlite":
        database = engine.url.database or ":memory:"
        return f"sqlite {database if database == ':memory:' else os.path.realpath(database)}"
    with engine.connect() as conn:
        name = conn.exec_driver_sql("SELECT current_database()").scalar()
    try:
        with engine.connect() as conn:
            cluster = conn.exec_driver_sql(
                "SELECT system_identifier FROM pg_control_system()"
            ).scalar()
    except exc.DBAPIError:  # a server that hides it: its address stands in
        with engine.connect() as conn:
            cluster = conn.exec_driver_sql(
                "SELECT coalesce(host(inet_server_addr()), 'socket') || ':' || inet_server_port()"
            ).scalar()
    return f"postgresql {cluster} {name}"


def described(database_url: str) -> dict[str, str]:
    """The database at `database_url`: its `identity` and its URL as a person may see it."""
    engine = open_engine(database_url, pool_size=1)
    try:
        return {"identity": identity(engine), "url": safe_url(database_url)}
    finally:
        engine.dispose()


_served: dict[int, dict[str, str]] = {}
"""This process's answer, by pid: asked once, kept for the worker's life."""


@inspect_command(name=COMMAND)
def _serving(state: Any, **_: Any) -> dict[str, Any]:
    """Answer `COMMAND`: the database this worker's settings name, and the queues it
    consumes now (read at each answer: a consumer can be added or cancelled)."""
    queues = {"queues": consumed_queues(state.consumer)}
    pid = os.getpid()
    if pid not in _served:
        try:
            _served[pid] = described(state.app.nightshift_settings.database_url)
        except Exception as error:  # an answer that says why, never a dead command
            return {
                "identity": "",
                "url": "",
                "error": f"{type(error).__name__}: {error}",
                **queues,
            }
    return {**_served[pid], **queues}


def consumed_queues(consumer: Any) -> list[str]:
    """The names of the queues a worker's consumer reads (Celery's `active_queues`)."""
    task_consumer = getattr(consumer, "task_consumer", None)
    return sorted(q.name for q in task_consumer.queues) if task_consumer else []
