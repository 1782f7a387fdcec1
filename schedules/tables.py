"""The tables `schedules/` owns: applied schedule definitions and their fires.

Times are stored as UTC; SQLite returns them naive, so readers pass them
through `as_utc`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import Boolean, Column, DateTime, Index, Integer, MetaData, String, Table, Text

metadata = MetaData()

schedules = Table(
    "ns_schedules",
    metadata,
    Column("name", String(128), primary_key=True),
    Column("definition", Text, nullable=False),  # Schedule.to_json()
    Column("fingerprint", String(64), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("paused", Boolean, nullable=False, server_default="0"),
    Column("pause_note", Text, nullable=False, server_default=""),
    Column("revision", Integer, nullable=False),  # global, increasing: beat reloads by it
    Column("last_fire_at", DateTime(timezone=True), nullable=True),
    Column("runs_fired", Integer, nullable=False, server_default="0"),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("deleted", Boolean, nullable=False, server_default="0"),
)
Index("ix_ns_schedules_revision", schedules.c.revision)


def as_utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
