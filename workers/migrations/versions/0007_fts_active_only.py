"""memory: the full-text index covers active rows only

Only active memories are ever searched. With the GIN index over every row, each
row leaving `active` (superseded by a write, merged by consolidation, expired)
got a full set of GIN entries for its new row version, since `status` is in
another index and such an update cannot be HOT. Partial on `status = 'active'`,
those versions get none. PostgreSQL only; SQLite keeps its FTS5 table.

Revision ID: 0007_fts_active_only
Revises: 0006_maint_fillfactor
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

import memory.fulltext

revision = "0007_fts_active_only"
down_revision = "0006_maint_fillfactor"
branch_labels = None
depends_on = None


def upgrade() -> None:
    memory.fulltext.index_active_only(op.get_bind())


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_ns_memories_fts")
        op.execute("CREATE INDEX ix_ns_memories_fts ON ns_memories USING gin (search_vector)")
