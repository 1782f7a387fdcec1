"""memory: the load index covers active rows only, the slot index keyed rows only

Expiring, superseding or merging a memory changes its `status`, so the update
cannot be HOT and the new row version got an entry in every index. With the
load index partial on `status = 'active'` (and `status` out of its columns) and
the slot index partial on `key <> ''` (most memories have no key), an expired
keyless row gets entries in the primary key and idempotency indexes only: two
index insertions instead of four. Reads of a scope's non-active rows (history,
export, review) use the idempotency index's (tenant, user_id, agent_id) prefix.

Building the two indexes blocks writes to ns_memories for as long as it takes
(seconds at a million rows).

Revision ID: 0008_partial_memory_indexes
Revises: 0007_fts_active_only
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_partial_memory_indexes"
down_revision = "0007_fts_active_only"
branch_labels = None
depends_on = None

_SCOPE = ["tenant", "user_id", "agent_id"]
_ACTIVE = sa.text("status = 'active'")
_KEYED = sa.text("key <> ''")


def upgrade() -> None:
    op.drop_index("ix_ns_memories_loadable", table_name="ns_memories")
    op.create_index(
        "ix_ns_memories_loadable",
        "ns_memories",
        [*_SCOPE, "last_reinforced_at"],
        postgresql_where=_ACTIVE,
        sqlite_where=_ACTIVE,
    )
    op.drop_index("ix_ns_memories_scope_key", table_name="ns_memories")
    op.create_index(
        "ix_ns_memories_scope_key",
        "ns_memories",
        [*_SCOPE, "key"],
        postgresql_where=_KEYED,
        sqlite_where=_KEYED,
    )


def downgrade() -> None:
    op.drop_index("ix_ns_memories_scope_key", table_name="ns_memories")
    op.create_index("ix_ns_memories_scope_key", "ns_memories", [*_SCOPE, "key"])
    op.drop_index("ix_ns_memories_loadable", table_name="ns_memories")
    op.create_index(
        "ix_ns_memories_loadable", "ns_memories", [*_SCOPE, "status", "last_reinforced_at"]
    )
