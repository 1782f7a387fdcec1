"""workers: count a write message's redeliveries, so a poison batch is given up

A write batch that took its writer down (killed, out of memory, a fault in native
code) was redelivered, took the writer down again, and so on for ever, while every
other write of its queue waited behind it. `ns_write_attempts` counts, per
receipt handle, the deliveries that came back (`workers.write_attempts`); past
`NIGHTSHIFT_WRITE_MAX_ATTEMPTS` the batch is refused with the rule
`writer-crashed` instead of being applied again.

Revision ID: 0014_write_attempts
Revises: 0013_folded_keys
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from memory.tables import Timestamp

revision = "0014_write_attempts"
down_revision = "0013_folded_keys"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "ns_write_attempts",
        sa.Column("handle", sa.String(300), primary_key=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("first_at", Timestamp(), nullable=False),
        sa.Column("last_at", Timestamp(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("ns_write_attempts")
