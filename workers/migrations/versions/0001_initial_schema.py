"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

import memory.fulltext
import memory.tables

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ns_audit",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", memory.tables.Timestamp(), nullable=False),
        sa.Column("actor", sa.String(length=255), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("memory_id", sa.String(length=36), nullable=True),
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("detail", sa.Text(), server_default="", nullable=False),
        sa.Column("redacted", sa.Boolean(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("ns_audit", schema=None) as batch_op:
        batch_op.create_index("ix_ns_audit_memory", ["memory_id"], unique=False)

    op.create_table(
        "ns_memories",
        sa.Column("id", sa.String(length=36), nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("user_id", sa.String(length=128), server_default="", nullable=False),
        sa.Column("agent_id", sa.String(length=128), server_default="", nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("key", sa.String(length=256), server_default="", nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("reference", sa.Text(), server_default="", nullable=False),
        sa.Column("run_id", sa.String(length=255), server_default="", nullable=False),
        sa.Column("task_id", sa.String(length=255), server_default="", nullable=False),
        sa.Column("agent", sa.String(length=128), server_default="", nullable=False),
        sa.Column("subagent", sa.String(length=128), server_default="", nullable=False),
        sa.Column("schedule", sa.String(length=128), server_default="", nullable=False),
        sa.Column("subject", sa.String(length=128), server_default="", nullable=False),
        sa.Column("idempotency_key", sa.String(length=512), nullable=False),
        sa.Column("version", sa.Integer(), server_default="1", nullable=False),
        sa.Column("score", sa.Float(), server_default="1.0", nullable=False),
        sa.Column("created_at", memory.tables.Timestamp(), nullable=False),
        sa.Column("valid_from", memory.tables.Timestamp(), nullable=False),
        sa.Column("valid_to", memory.tables.Timestamp(), nullable=True),
        sa.Column("superseded_at", memory.tables.Timestamp(), nullable=True),
        sa.Column("supersedes_id", sa.String(length=36), nullable=True),
        sa.Column("superseded_by_id", sa.String(length=36), nullable=True),
        sa.Column("last_reinforced_at", memory.tables.Timestamp(), nullable=False),
        sa.Column("last_used_at", memory.tables.Timestamp(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint(
            "tenant", "user_id", "agent_id", "idempotency_key", name="uq_ns_memories_idem"
        ),
    )
    with op.batch_alter_table("ns_memories", schema=None) as batch_op:
        batch_op.create_index("ix_ns_memories_run", ["run_id"], unique=False)
        batch_op.create_index(
            "ix_ns_memories_scope_key", ["tenant", "user_id", "agent_id", "key"], unique=False
        )
        batch_op.create_index(
            "ix_ns_memories_scope_status", ["tenant", "user_id", "agent_id", "status"], unique=False
        )

    op.create_table(
        "ns_write_receipts",
        sa.Column("handle", sa.String(length=64), nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("run_id", sa.String(length=255), server_default="", nullable=False),
        sa.Column("created_at", memory.tables.Timestamp(), nullable=False),
        sa.Column("decisions", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("handle"),
    )
    with op.batch_alter_table("ns_write_receipts", schema=None) as batch_op:
        batch_op.create_index("ix_ns_write_receipts_run", ["run_id"], unique=False)

    op.create_table(
        "ns_schedules",
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("definition", sa.Text(), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("paused", sa.Boolean(), server_default="0", nullable=False),
        sa.Column("pause_note", sa.Text(), server_default="", nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("last_fire_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("runs_fired", sa.Integer(), server_default="0", nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deleted", sa.Boolean(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )
    with op.batch_alter_table("ns_schedules", schema=None) as batch_op:
        batch_op.create_index("ix_ns_schedules_revision", ["revision"], unique=False)

    op.create_table(
        "ns_runs",
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("agent", sa.String(length=128), nullable=False),
        sa.Column("tenant", sa.String(length=128), nullable=False),
        sa.Column("user_id", sa.String(length=128), server_default="", nullable=False),
        sa.Column("schedule", sa.String(length=128), server_default="", nullable=False),
        sa.Column("goal", sa.Text(), server_default="", nullable=False),
        sa.Column("trigger_kind", sa.String(length=16), nullable=False),
        sa.Column("trigger_origin", sa.String(length=16), server_default="api", nullable=False),
        sa.Column("fire_time", memory.tables.Timestamp(), nullable=True),
        sa.Column("payload", sa.Text(), server_default="{}", nullable=False),
        sa.Column("time_limit", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("lease_owner", sa.String(length=255), server_default="", nullable=False),
        sa.Column("lease_expires_at", memory.tables.Timestamp(), nullable=True),
        sa.Column("enqueued_at", memory.tables.Timestamp(), nullable=False),
        sa.Column("started_at", memory.tables.Timestamp(), nullable=True),
        sa.Column("finished_at", memory.tables.Timestamp(), nullable=True),
        sa.Column("sandbox", sa.Text(), server_default="", nullable=False),
        sa.Column("loaded_ids", sa.Text(), server_default="[]", nullable=False),
        sa.Column("candidates", sa.Integer(), server_default="0", nullable=False),
        sa.Column("write_handle", sa.String(length=300), server_default="", nullable=False),
        sa.Column("summary", sa.Text(), server_default="", nullable=False),
        sa.Column("error", sa.Text(), server_default="", nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    with op.batch_alter_table("ns_runs", schema=None) as batch_op:
        batch_op.create_index("ix_ns_runs_enqueued", ["enqueued_at"], unique=False)
        batch_op.create_index("ix_ns_runs_schedule", ["schedule", "enqueued_at"], unique=False)
        batch_op.create_index(
            "ix_ns_runs_status_lease", ["status", "lease_expires_at"], unique=False
        )

    memory.fulltext.create(op.get_bind())


def downgrade() -> None:
    memory.fulltext.drop(op.get_bind())
    with op.batch_alter_table("ns_runs", schema=None) as batch_op:
        batch_op.drop_index("ix_ns_runs_status_lease")
        batch_op.drop_index("ix_ns_runs_schedule")
        batch_op.drop_index("ix_ns_runs_enqueued")

    op.drop_table("ns_runs")
    with op.batch_alter_table("ns_schedules", schema=None) as batch_op:
        batch_op.drop_index("ix_ns_schedules_revision")

    op.drop_table("ns_schedules")
    with op.batch_alter_table("ns_write_receipts", schema=None) as batch_op:
        batch_op.drop_index("ix_ns_write_receipts_run")

    op.drop_table("ns_write_receipts")
    with op.batch_alter_table("ns_memories", schema=None) as batch_op:
        batch_op.drop_index("ix_ns_memories_scope_status")
        batch_op.drop_index("ix_ns_memories_scope_key")
        batch_op.drop_index("ix_ns_memories_run")

    op.drop_table("ns_memories")
    with op.batch_alter_table("ns_audit", schema=None) as batch_op:
        batch_op.drop_index("ix_ns_audit_memory")

    op.drop_table("ns_audit")
