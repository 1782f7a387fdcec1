"""The tables maintenance owns, on `memory.tables.metadata` (migrated by 0002_maintenance).

None of them ever holds a memory's content except `ns_hot_summaries`, which is
derived from active memories and rebuilt whenever one of its sources changes or
is forgotten. Tombstones keep who, when, why and how many, and the ids of what
they deleted; never text.
"""

from __future__ import annotations

from sqlalchemy import Column, Index, Integer, String, Table, Text, UniqueConstraint

from memory.tables import Timestamp, metadata

hot_summaries = Table(
    "ns_hot_summaries",
    metadata,
    Column("tenant", String(128), primary_key=True),
    Column("user_id", String(128), primary_key=True),
    Column("agent_id", String(128), primary_key=True),
    Column("content", Text, nullable=False),
    Column("source_ids", Text, nullable=False),  # JSON list of memory ids it was built from
    Column("memory_count", Integer, nullable=False),
    Column("built_at", Timestamp(), nullable=False),
)

tombstones = Table(
    "ns_tombstones",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("at", Timestamp(), nullable=False),
    Column("tenant", String(128), nullable=False),
    Column("actor", String(255), nullable=False),
    Column("role", String(16), nullable=False),  # person | operator | maintenance
    Column(
        "selector", String(16), nullable=False
    ),  # subject | scope | run | source | id | text | purge
    Column("reason", String(500), nullable=False, server_default=""),
    Column("deleted", Integer, nullable=False),
    Column("report", Text, nullable=False),  # JSON counts; never content
    # 0012: the ids of the memories it deleted (JSON list), so that an import can
    # delete them again (`memory.forget_replay`); NULL on tombstones written before.
    Column("memory_ids", Text, nullable=True),
)
Index("ix_ns_tombstones_tenant_at", tombstones.c.tenant, tombstones.c.at)

memory_links = Table(
    "ns_memory_links",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("tenant", String(128), nullable=False),
    Column("target_id", String(36), nullable=False),  # the merged memory or episode summary
    Column("source_id", String(36), nullable=False),  # a memory it absorbed (kept, superseded)
    Column(
        "rule", String(16), nullable=False
    ),  # same-key | same-content | near-duplicate | compacted
    Column("batch", String(36), nullable=False),
    Column("expected_version", Integer, nullable=False),
    Column("at", Timestamp(), nullable=False),
    UniqueConstraint("target_id", "source_id", name="uq_ns_memory_links"),
)
Index("ix_ns_memory_links_source", memory_links.c.source_id)
Index("ix_ns_memory_links_batch", memory_links.c.batch)

maintenance_passes = Table(
    "ns_maintenance_passes",
    metadata,
    Column("tenant", String(128), primary_key=True),
    Column("job", String(16), primary_key=True),
    Column("last_at", Timestamp(), nullable=False),
)

vote_batches = Table(
    "ns_vote_batches",
    metadata,
    Column("handle", String(255), primary_key=True),
    Column("applied_at", Timestamp(), nullable=False),
    Column("votes", Integer, nullable=False),
)
