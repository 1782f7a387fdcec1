"""maintenance: a tombstone names the memories it deleted

An export made after a forget, imported on top of one made before it, brought
the tombstone but deleted nothing: the forgotten person came back. With the ids
of what it deleted (ids only, never text), an import can forget them again
(`memory.forget_replay`). Tombstones written before stay NULL: an import that
brings one of those to a database already holding the tenant's memory is
refused, since what it deleted cannot be named.

Revision ID: 0012_tombstone_memory_ids
Revises: 0011_fold_function
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_tombstone_memory_ids"
down_revision = "0011_fold_function"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("ns_tombstones", schema=None) as batch_op:
        batch_op.add_column(sa.Column("memory_ids", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ns_tombstones", schema=None) as batch_op:
        batch_op.drop_column("memory_ids")
