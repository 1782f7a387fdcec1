"""workers: an operator acknowledges a given-up write, and status is healthy again

A given-up write (0015) kept `nightshift status` unhealthy for 24 hours whatever
the operator did about it. `nightshift memory given-up --ack HANDLE` now records
who acknowledged it and when; status and the `nightshift_writes_given_up` metric
count only the writes nobody has acknowledged (`workers.write_attempts`).

Revision ID: 0016_acknowledged_given_up
Revises: 0015_given_up_writes
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from memory.tables import Timestamp

revision = "0016_acknowledged_given_up"
down_revision = "0015_given_up_writes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ns_write_attempts") as batch:
        batch.add_column(sa.Column("acknowledged_at", Timestamp(), nullable=True))
        batch.add_column(sa.Column("acknowledged_by", sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ns_write_attempts") as batch:
        batch.drop_column("acknowledged_by")
        batch.drop_column("acknowledged_at")
