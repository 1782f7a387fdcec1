"""The tables `schedules/` owns: applied schedules, what became of each fire, and
the lease that lets one beat lead.

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
    Column("last_fire_at", DateTime(timezone=True), nullable=True),  # the latest fire beat handled
    Column("runs_fired", Integer, nullable=False, server_default="0"),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("deleted", Boolean, nullable=False, server_default="0"),
    # overlap = buffer_one: the one fire waiting for the running run to finish
    Column("pending_fire_at", DateTime(timezone=True), nullable=True),
)
Index("ix_ns_schedules_revision", schedules.c.revision)
Index("ix_ns_schedules_pending", schedules.c.pending_fire_at)

fires = Table(
    "ns_schedule_fires",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("schedule", String(128), nullable=False),
    # Consecutive fires skipped for the same reason share one row: first, last, count.
    Column("fire_time", DateTime(timezone=True), nullable=False),
    Column("last_fire_time", DateTime(timezone=True), nullable=False),
    Column("count", Integer, nullable=False, server_default="1"),
    Column("outcome", String(16), nullable=False),  # FireOutcome
    Column("reason", String(32), nullable=False, server_default=""),  # SkipReason
    Column("run_key", String(255), nullable=False, server_default=""),
    Column("origin", String(16), nullable=False, server_default="beat"),  # beat|trigger|backfill
    Column("detail", Text, nullable=False, server_default=""),
    Column("decided_by", String(255), nullable=False, server_default=""),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
)
Index("ix_ns_schedule_fires_schedule", fires.c.schedule, fires.c.id)

leases = Table(
    "ns_beat_leases",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("holder", String(255), nullable=False),
    Column("term", Integer, nullable=False),  # +1 on every change of holder
    Column("acquired_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)


def as_utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
