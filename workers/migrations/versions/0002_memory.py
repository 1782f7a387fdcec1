"""memory: a stored full-text vector on PostgreSQL, so ranking does not re-parse text

Revision ID: 0002_memory
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

import memory.fulltext

revision = "0002_memory"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ns_memories", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "search_vector",
                sa.Text().with_variant(postgresql.TSVECTOR(), "postgresql"),
                nullable=True,
            )
        )
    memory.fulltext.create_stored_vector(op.get_bind())


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        op.execute("DROP TRIGGER IF EXISTS ns_memories_search_vector ON ns_memories")
        op.execute("DROP FUNCTION IF EXISTS ns_memories_search_vector()")
        op.execute("DROP INDEX IF EXISTS ix_ns_memories_fts")
    with op.batch_alter_table("ns_memories", schema=None) as batch_op:
        batch_op.drop_column("search_vector")
    memory.fulltext.create(bind)
