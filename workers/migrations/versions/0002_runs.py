"""runs: parent run and subagent name, cooperative cancellation

Revision ID: 0002_runs
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002_runs"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ns_runs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("parent_key", sa.String(length=255), server_default="", nullable=False)
        )
        batch_op.add_column(
            sa.Column("subagent", sa.String(length=128), server_default="", nullable=False)
        )
        batch_op.add_column(
            sa.Column("cancel_requested", sa.Boolean(), server_default="0", nullable=False)
        )
        batch_op.create_index("ix_ns_runs_parent", ["parent_key"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("ns_runs", schema=None) as batch_op:
        batch_op.drop_index("ix_ns_runs_parent")
        batch_op.drop_column("cancel_requested")
        batch_op.drop_column("subagent")
        batch_op.drop_column("parent_key")
