"""maintenance: leave room on ns_memories pages so score-only updates stay HOT

Decay writes back the decayed score of memories that fell under the load bar, and
votes change scores too. `score` is in no index, so such an update can be a HOT
update (heap only: no new entry in any of the table's indexes, the full-text GIN
among them) — but only when the row's page has room for the new version. Pages
filled to 100% (the default, and what a bulk load leaves) never do, so every score
update paid for seven index insertions. With fillfactor 90, inserts leave a tenth
of each page free. PostgreSQL only; existing pages keep their fill until they are
rewritten (VACUUM FULL or pg_repack), new ones get the room at once.

Revision ID: 0006_maint_fillfactor
Revises: 0005_store_indexes
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import op

revision = "0006_maint_fillfactor"
down_revision = "0005_store_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE ns_memories SET (fillfactor = 90)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE ns_memories RESET (fillfactor)")
