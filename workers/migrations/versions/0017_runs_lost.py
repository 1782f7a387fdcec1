"""workers: count a run's lost attempts apart from its attempts

`NIGHTSHIFT_RUN_MAX_ATTEMPTS` gives up a run whose worker stopped that many times
without recording an outcome. It read `attempts`, which also counts the attempts
that gave the run back to the queue after a transient failure, so a run retried
twice for a database blip was given up after three crashes, its error saying its
worker had stopped on each of five. `lost` counts only the attempts whose lease
lapsed (`workers.runs.claim`, `requeue` and `give_up`).

Revision ID: 0017_runs_lost
Revises: 0016_acknowledged_given_up
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_runs_lost"
down_revision = "0016_acknowledged_given_up"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ns_runs") as batch:
        batch.add_column(sa.Column("lost", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("ns_runs") as batch:
        batch.drop_column("lost")
