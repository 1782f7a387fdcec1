"""runs: the goal attempt (tried, evidence) on the run row, and the index that lists them

Attempts were episode memories written through the memory writer, one writer
message per run; a run's row already holds its outcome, so the attempt joins it.

Revision ID: 0004_runs_attempts
Revises: 0003
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004_runs_attempts"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ns_runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("tried", sa.Text(), server_default="", nullable=False))
        batch_op.add_column(sa.Column("evidence", sa.Text(), server_default="", nullable=False))
        batch_op.create_index(
            "ix_ns_runs_scope_finished",
            ["tenant", "user_id", "agent", "finished_at"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("ns_runs", schema=None) as batch_op:
        batch_op.drop_index("ix_ns_runs_scope_finished")
        batch_op.drop_column("evidence")
        batch_op.drop_column("tried")
