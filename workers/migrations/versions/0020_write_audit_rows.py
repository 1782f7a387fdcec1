"""memory: ix_ns_audit_write_ids, a memory's entries in the writer's audit rows

The memory writer stores an apply's audit trail as one row per tenant (action
``write``), which names the memories its decisions touched; readers expand it into
one entry per candidate with the apply's receipt (`memory.write_audit`). This
index finds a memory's rows by id on PostgreSQL; SQLite reads them without one.
Rows written one per candidate before stay as they are and are read as before.

Revision ID: 0020_write_audit_rows
Revises: 0019_rows_unchanged
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

import memory.write_audit

revision = "0020_write_audit_rows"
down_revision = "0019_rows_unchanged"
branch_labels = None
depends_on = None


def upgrade() -> None:
    memory.write_audit.create(op.get_bind())


def downgrade() -> None:
    memory.write_audit.drop(op.get_bind())
