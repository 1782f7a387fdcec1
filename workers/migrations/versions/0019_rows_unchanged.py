"""memory: ns_rows_unchanged(boolean), the check of a writer's remembered slots

The memory writer remembers the active row it left in each slot
(`memory.known_slots`) and applies a batch whose slots it all knows without
reading them first; its write statement checks that the remembered rows are
unchanged and calls `ns_rows_unchanged`, which raises a unique violation when one
is not. PostgreSQL only: SQLite always reads first.

Revision ID: 0019_rows_unchanged
Revises: 0018_unconfuse_function
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

import memory.known_slots

revision = "0019_rows_unchanged"
down_revision = "0018_unconfuse_function"
branch_labels = None
depends_on = None


def upgrade() -> None:
    memory.known_slots.create(op.get_bind())


def downgrade() -> None:
    memory.known_slots.drop(op.get_bind())
