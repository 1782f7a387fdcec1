"""One Alembic environment for every package's tables."""

from __future__ import annotations

from typing import Any

from alembic import context

from workers.migrations_filter import include_object
from workers.schema import ALL_METADATA

config = context.config


def run_migrations() -> None:
    connection = config.attributes.get("connection")
    if connection is None:
        from memory.engine import open_engine

        engine = open_engine(config.get_main_option("sqlalchemy.url") or "")
        with engine.connect() as conn:
            _run(conn)
        engine.dispose()
    else:
        _run(connection)


def _run(connection: Any) -> None:
    context.configure(
        connection=connection,
        target_metadata=ALL_METADATA,
        include_object=include_object,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations()
