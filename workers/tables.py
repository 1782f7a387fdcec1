"""The tables `workers/` owns: one row per run, keyed by its run key."""

from __future__ import annotations

from sqlalchemy import Boolean, Column, Index, Integer, MetaData, String, Table, Text

from memory.tables import Timestamp

metadata = MetaData()

runs = Table(
    "ns_runs",
    metadata,
    Column("key", String(255), primary_key=True),  # schedule@fire-time, agent@event:id, …
    Column("agent", String(128), nullable=False),
    Column("tenant", String(128), nullable=False),
    Column("user_id", String(128), nullable=False, server_default=""),
    Column("schedule", String(128), nullable=False, server_default=""),
    Column("goal", Text, nullable=False, server_default=""),
    Column("trigger_kind", String(16), nullable=False),
    Column("trigger_origin", String(16), nullable=False, server_default="api"),
    Column("fire_time", Timestamp(), nullable=True),
    Column("payload", Text, nullable=False, server_default="{}"),
    Column("time_limit", Integer, nullable=False),
    Column("status", String(16), nullable=False),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("lease_owner", String(255), nullable=False, server_default=""),
    Column("lease_expires_at", Timestamp(), nullable=True),
    Column("enqueued_at", Timestamp(), nullable=False),
    Column("started_at", Timestamp(), nullable=True),
    Column("finished_at", Timestamp(), nullable=True),
    Column("sandbox", Text, nullable=False, server_default=""),
    Column("loaded_ids", Text, nullable=False, server_default="[]"),
    Column("candidates", Integer, nullable=False, server_default="0"),
    Column("write_handle", String(300), nullable=False, server_default=""),
    Column("summary", Text, nullable=False, server_default=""),
    Column("error", Text, nullable=False, server_default=""),
    # 0002_runs: subagents (a child run names its parent) and cooperative cancellation.
    Column("parent_key", String(255), nullable=False, server_default=""),
    Column("subagent", String(128), nullable=False, server_default=""),
    Column("cancel_requested", Boolean, nullable=False, server_default="0"),
    # 0004_runs_attempts: the run's goal attempt (what it tried, its evidence) lives on
    # its row, so a run that writes no memory sends the writer nothing.
    Column("tried", Text, nullable=False, server_default=""),
    Column("evidence", Text, nullable=False, server_default=""),
    # 0017_runs_lost: how many of its attempts ended with the worker gone (the lease
    # lapsed); the attempt cap counts these, not transient retries.
    Column("lost", Integer, nullable=False, server_default="0"),
)
Index("ix_ns_runs_status_lease", runs.c.status, runs.c.lease_expires_at)
Index("ix_ns_runs_schedule", runs.c.schedule, runs.c.enqueued_at)
Index("ix_ns_runs_enqueued", runs.c.enqueued_at)
Index("ix_ns_runs_parent", runs.c.parent_key)
Index("ix_ns_runs_scope_finished", runs.c.tenant, runs.c.user_id, runs.c.agent, runs.c.finished_at)

write_attempts = Table(
    "ns_write_attempts",
    metadata,
    # 0014_write_attempts: how often a write message came back unfinished
    # (`workers.write_attempts`); a row lives while its message does, and a while
    # longer once the message is given up (0015_given_up_writes: `given_up_at`), and
    # acknowledged by an operator (0016_acknowledged_given_up).
    Column("handle", String(300), primary_key=True),
    Column("attempts", Integer, nullable=False),
    Column("first_at", Timestamp(), nullable=False),
    Column("last_at", Timestamp(), nullable=False),
    Column("given_up_at", Timestamp(), nullable=True),
    Column("acknowledged_at", Timestamp(), nullable=True),
    Column("acknowledged_by", String(255), nullable=True),
)
