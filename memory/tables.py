"""The tables `memory/` owns. One SQLAlchemy Core metadata, migrated by Alembic.

Scope columns use `""` for "any" (see `records.ANY`) so that unique constraints
work the same on PostgreSQL and SQLite (NULLs are never equal to each other).
The full-text index is dialect specific and lives in `fulltext.py`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    Column,
    ColumnElement,
    DateTime,
    Float,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    and_,
    event,
    literal_column,
)
from sqlalchemy.dialects.postgresql import TSVECTOR
from sqlalchemy.engine.default import DefaultExecutionContext
from sqlalchemy.types import TypeDecorator

from memory import folding, known_slots

metadata = MetaData()
for _functions in (folding, known_slots):
    event.listen(metadata, "after_create", lambda target, conn, m=_functions, **kw: m.create(conn))
    event.listen(metadata, "before_drop", lambda target, conn, m=_functions, **kw: m.drop(conn))


def utc(value: datetime) -> datetime:
    """`value` in UTC; a naive datetime is refused (its zone would be a guess)."""
    if value.tzinfo is None:
        raise ValueError("naive datetime refused: pass an aware UTC datetime")
    return value.astimezone(UTC)


class Timestamp(TypeDecorator[datetime]):
    """An aware UTC datetime on both dialects (SQLite would hand back naive ones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        return utc(value) if value is not None else None

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _key_folded(context: DefaultExecutionContext) -> str:
    """`key_folded` of a row inserted without it (SQLAlchemy fills it per row); the
    writer's own inserts give it."""
    return folding.folded_key(context.get_current_parameters().get("key", ""))


memories = Table(
    "ns_memories",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("tenant", String(128), nullable=False),
    Column("user_id", String(128), nullable=False, server_default=""),
    Column("agent_id", String(128), nullable=False, server_default=""),
    Column("kind", String(16), nullable=False),
    Column("key", String(256), nullable=False, server_default=""),
    # The key as it is matched (`folding.folded_key`): the slot. Text, since NFKC can
    # lengthen a key; the gate keeps it within the key's limit.
    Column("key_folded", Text, nullable=False, server_default="", default=_key_folded),
    Column("content", Text, nullable=False),
    Column("content_hash", String(16), nullable=False),
    Column("status", String(16), nullable=False),
    Column("source", String(16), nullable=False),
    Column("confidence", Float, nullable=False),
    Column("reference", Text, nullable=False, server_default=""),
    Column("run_id", String(255), nullable=False, server_default=""),
    Column("task_id", String(255), nullable=False, server_default=""),
    Column("agent", String(128), nullable=False, server_default=""),
    Column("subagent", String(128), nullable=False, server_default=""),
    Column("schedule", String(128), nullable=False, server_default=""),
    Column("subject", String(128), nullable=False, server_default=""),
    Column("idempotency_key", String(512), nullable=False),
    Column("version", Integer, nullable=False, server_default="1"),
    Column("score", Float, nullable=False, server_default="1.0"),
    Column("created_at", Timestamp(), nullable=False),
    Column("valid_from", Timestamp(), nullable=False),
    Column("valid_to", Timestamp(), nullable=True),
    Column("superseded_at", Timestamp(), nullable=True),
    Column("supersedes_id", String(36), nullable=True),
    Column("superseded_by_id", String(36), nullable=True),
    Column("last_reinforced_at", Timestamp(), nullable=False),
    Column("last_used_at", Timestamp(), nullable=True),
    # PostgreSQL: to_tsvector('english', content), kept by a trigger (memory.fulltext),
    # so ranking reads a stored vector instead of parsing every candidate row's text.
    # SQLite: unused (NULL); its full text lives in the FTS5 table.
    Column("search_vector", Text().with_variant(TSVECTOR(), "postgresql"), nullable=True),
    UniqueConstraint(
        "tenant", "user_id", "agent_id", "idempotency_key", name="uq_ns_memories_idem"
    ),
    # Room on each page so score-only updates (decay, votes) stay HOT: 0006_maint_fillfactor.
    postgresql_with={"fillfactor": 90},
)
DERIVED = frozenset({"search_vector", "key_folded"})
"""Columns the store derives from others for its indexes; a `Memory` is read without them."""
MEMORY_COLUMNS = tuple(c for c in memories.c if c.name not in DERIVED)
"""The columns a `Memory` is built from."""

# The two row classes the partial indexes below are built on. Literals, never bound
# parameters: a prepared statement (PostgreSQL) or any statement (SQLite) can use
# a partial index only when its WHERE carries the index's own term, and a
# parameter does not match it.
ACTIVE_ROW: ColumnElement[bool] = memories.c.status == literal_column("'active'")
KEYED_ROW: ColumnElement[bool] = memories.c.key != literal_column("''")

# What a load reads: one scope's active rows reinforced within the TTL. With
# last_reinforced_at in the index, rows past their TTL are skipped in the index
# instead of being fetched from the heap and thrown away (a scope's rows sit on as
# many heap pages as it has rows). Partial on active rows: a row that leaves
# `active` (expired, superseded, merged) gets no entry for its new version, and
# the index holds only what loads can return. Reads of a scope's other rows use
# the idempotency index's (tenant, user_id, agent_id) prefix.
Index(
    "ix_ns_memories_loadable",
    memories.c.tenant,
    memories.c.user_id,
    memories.c.agent_id,
    memories.c.last_reinforced_at,
    postgresql_where=ACTIVE_ROW,
    sqlite_where=ACTIVE_ROW,
)
# The slot lookups (supersession, history) of keyed rows; most memories have no key.
# Slots are folded keys (0013): "diet" and "Diet " are one.
Index(
    "ix_ns_memories_scope_key",
    memories.c.tenant,
    memories.c.user_id,
    memories.c.agent_id,
    memories.c.key_folded,
    postgresql_where=KEYED_ROW,
    sqlite_where=KEYED_ROW,
)
# One active value per slot, whoever writes: the writer's supersession, a review's
# approval and two writers racing (a second consumer on a shard's queue) all meet
# it. A write that would leave two active values fails and is applied again from a
# fresh read (`memory.sql`). It also answers the slot lookups of the writer.
Index(
    "uq_ns_memories_active_slot",
    memories.c.tenant,
    memories.c.user_id,
    memories.c.agent_id,
    memories.c.key_folded,
    unique=True,
    postgresql_where=and_(ACTIVE_ROW, KEYED_ROW),
    sqlite_where=and_(ACTIVE_ROW, KEYED_ROW),
)
# No index on run_id: forgetting by run asks for `run_id = ? OR task_id = ?` within
# a tenant, which the scope index answers; a run_id index was never used and cost
# every insert.

receipts = Table(
    "ns_write_receipts",
    metadata,
    Column("handle", String(64), primary_key=True),
    Column("tenant", String(128), nullable=False),
    Column("run_id", String(255), nullable=False, server_default=""),
    Column("created_at", Timestamp(), nullable=False),
    Column("decisions", Text, nullable=False),  # JSON list, one entry per candidate
)
Index("ix_ns_write_receipts_run", receipts.c.run_id)

audit = Table(
    "ns_audit",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Timestamp(), nullable=False),
    Column("actor", String(255), nullable=False),
    Column("action", String(32), nullable=False),
    Column("memory_id", String(36), nullable=True),
    Column("tenant", String(128), nullable=False),
    Column("detail", Text, nullable=False, server_default=""),  # JSON
    Column("redacted", Boolean, nullable=False, server_default="0"),
)
Index("ix_ns_audit_memory", audit.c.memory_id)
