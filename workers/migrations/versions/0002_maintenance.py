"""maintenance: hot summaries, tombstones, merge links, pass marks, vote batches

Revision ID: 0002_maintenance
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import memory.tables

revision = "0002_maintenance"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ns_hot_summaries",
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("user_id", sa.String(length=128), nullable=False),
        sa.Column("agent_id", sa.String(length=128), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("source_ids", sa.Text(), nullable=False),
        sa.Column("memory_count", sa.Integer(), nullable=False),
        sa.Column("built_at", memory.tables.Timestamp(), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "user_id", "agent_id"),
    )
    op.create_table(
        "ns_tombstones",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("at", memory.tables.Timestamp(), nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("role", sa.String(length=16), nullable=False),
        sa.Column("selector", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=500), server_default="", nullable=False),
        sa.Column("deleted", sa.Integer(), nullable=False),
        sa.Column("report", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("ns_tombstones", schema=None) as batch_op:
        batch_op.create_index("ix_ns_tombstones_tenant_at", ["tenant", "at"], unique=False)
    op.create_table(
        "ns_memory_links",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("target_id", sa.String(length=36), nullable=False),
        sa.Column("source_id", sa.String(length=36), nullable=False),
        sa.Column("rule", sa.String(length=16), nullable=False),
        sa.Column("batch", sa.String(length=36), nullable=False),
        sa.Column("expected_version", sa.Integer(), nullable=False),
        sa.Column("at", memory.tables.Timestamp(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("target_id", "source_id", name="uq_ns_memory_links"),
    )
    with op.batch_alter_table("ns_memory_links", schema=None) as batch_op:
        batch_op.create_index("ix_ns_memory_links_source", ["source_id"], unique=False)
        batch_op.create_index("ix_ns_memory_links_batch", ["batch"], unique=False)
    op.create_table(
        "ns_maintenance_passes",
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("job", sa.String(length=16), nullable=False),
        sa.Column("last_at", memory.tables.Timestamp(), nullable=False),
        sa.PrimaryKeyConstraint("tenant", "job"),
    )
    op.create_table(
        "ns_vote_batches",
        sa.Column("handle", sa.String(length=255), nullable=False),
        sa.Column("applied_at", memory.tables.Timestamp(), nullable=False),
        sa.Column("votes", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("handle"),
    )


def downgrade() -> None:
    op.drop_table("ns_vote_batches")
    op.drop_table("ns_maintenance_passes")
    with op.batch_alter_table("ns_memory_links", schema=None) as batch_op:
        batch_op.drop_index("ix_ns_memory_links_batch")
        batch_op.drop_index("ix_ns_memory_links_source")
    op.drop_table("ns_memory_links")
    with op.batch_alter_table("ns_tombstones", schema=None) as batch_op:
        batch_op.drop_index("ix_ns_tombstones_tenant_at")
    op.drop_table("ns_tombstones")
    op.drop_table("ns_hot_summaries")
