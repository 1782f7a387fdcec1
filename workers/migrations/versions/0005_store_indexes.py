"""memory: the load's index covers the TTL bound; drop the unused run_id index

A load reads one scope's active rows reinforced within the TTL. The scope index
now ends with last_reinforced_at, so rows past their TTL are skipped in the index
rather than fetched from the heap and discarded. ix_ns_memories_run was never
used by any query (forgetting by run filters `run_id OR task_id` within a tenant)
and cost every insert.

Revision ID: 0005_store_indexes
Revises: 0004_runs_attempts
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0005_store_indexes"
down_revision = "0004_runs_attempts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ns_memories", schema=None) as batch_op:
        batch_op.drop_index("ix_ns_memories_run")
        batch_op.drop_index("ix_ns_memories_scope_status")
        batch_op.create_index(
            "ix_ns_memories_loadable",
            ["tenant", "user_id", "agent_id", "status", "last_reinforced_at"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("ns_memories", schema=None) as batch_op:
        batch_op.drop_index("ix_ns_memories_loadable")
        batch_op.create_index(
            "ix_ns_memories_scope_status",
            ["tenant", "user_id", "agent_id", "status"],
            unique=False,
        )
        batch_op.create_index("ix_ns_memories_run", ["run_id"], unique=False)
