"""schedules: fire records, the beat leader lease, the buffered fire

Revision ID: 0002_schedules
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_schedules"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ns_schedules", schema=None) as batch_op:
        batch_op.add_column(sa.Column("pending_fire_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index("ix_ns_schedules_pending", ["pending_fire_at"], unique=False)

    op.create_table(
        "ns_schedule_fires",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("schedule", sa.String(length=128), nullable=False),
        sa.Column("fire_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_fire_time", sa.DateTime(timezone=True), nullable=False),
        sa.Column("count", sa.Integer(), server_default="1", nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=32), server_default="", nullable=False),
        sa.Column("run_key", sa.String(length=255), server_default="", nullable=False),
        sa.Column("origin", sa.String(length=16), server_default="beat", nullable=False),
        sa.Column("detail", sa.Text(), server_default="", nullable=False),
        sa.Column("decided_by", sa.String(length=255), server_default="", nullable=False),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("ns_schedule_fires", schema=None) as batch_op:
        batch_op.create_index("ix_ns_schedule_fires_schedule", ["schedule", "id"], unique=False)

    op.create_table(
        "ns_beat_leases",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=255), nullable=False),
        sa.Column("term", sa.Integer(), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )


def downgrade() -> None:
    op.drop_table("ns_beat_leases")
    with op.batch_alter_table("ns_schedule_fires", schema=None) as batch_op:
        batch_op.drop_index("ix_ns_schedule_fires_schedule")
    op.drop_table("ns_schedule_fires")
    with op.batch_alter_table("ns_schedules", schema=None) as batch_op:
        batch_op.drop_index("ix_ns_schedules_pending")
        batch_op.drop_column("pending_fire_at")
