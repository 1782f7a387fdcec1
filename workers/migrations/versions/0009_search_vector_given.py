"""memory: an INSERT that brings its search vector keeps it

The trigger that fills `search_vector` ran a PL/pgSQL function for every inserted
row. The memory writer now computes the vector in its own INSERT; the trigger
fires on INSERT only when the vector is missing, and on every change of content
as before. PostgreSQL only; SQLite keeps its FTS5 table.

Revision ID: 0009_search_vector_given
Revises: 0008_partial_memory_indexes
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

import memory.fulltext

revision = "0009_search_vector_given"
down_revision = "0008_partial_memory_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    memory.fulltext.vector_given(op.get_bind())


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS ns_memories_search_vector_missing ON ns_memories")
        op.execute("DROP TRIGGER IF EXISTS ns_memories_search_vector ON ns_memories")
        op.execute(
            "CREATE TRIGGER ns_memories_search_vector BEFORE INSERT OR UPDATE OF content "
            "ON ns_memories FOR EACH ROW EXECUTE FUNCTION ns_memories_search_vector()"
        )
