"""workers: remember a given-up write message, so that status and metrics show it

A write message given up after `NIGHTSHIFT_WRITE_MAX_ATTEMPTS` (0014) was forgotten
at once: only its receipt and a log line said that a batch had taken its writer
down again and again. Its row in `ns_write_attempts` now stays, marked with
`given_up_at`, for `nightshift status` and the `nightshift_writes_given_up` metric
(`workers.write_attempts`).

Revision ID: 0015_given_up_writes
Revises: 0014_write_attempts
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from memory.tables import Timestamp

revision = "0015_given_up_writes"
down_revision = "0014_write_attempts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ns_write_attempts") as batch:
        batch.add_column(sa.Column("given_up_at", Timestamp(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ns_write_attempts") as batch:
        batch.drop_column("given_up_at")
