"""Statements whose SQL differs between PostgreSQL and SQLite, besides full text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Table
from sqlalchemy.dialects import postgresql, sqlite


def insert_ignoring_conflicts(
    conn: Connection, table: Table, rows: Sequence[dict[str, Any]], *, returning: str
) -> list[Any]:
    """Insert `rows`, silently skipping those that hit a unique constraint.

    Returns the `returning` column of the rows actually inserted, so a caller can
    tell "I created it" from "someone else already had".
    """
    if not rows:
        return []
    module: Any = postgresql if conn.dialect.name == "postgresql" else sqlite
    statement = module.insert(table).on_conflict_do_nothing().returning(table.c[returning])
    # executemany: SQLAlchemy batches it ("insertmanyvalues") and keeps RETURNING; a
    # single multi-VALUES statement would be re-compiled for every batch size.
    return list(conn.execute(statement, list(rows)).scalars())
