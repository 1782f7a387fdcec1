"""memory: at most one active value per slot, enforced by a unique partial index

Two writers applying values for one key at once (a second consumer on a shard's
queue, or a review approved while the writer supersedes) could each supersede the
same row, or each find the slot empty, and leave several active values. The
index makes the second of them fail; the store applies it again from a fresh
read.

Slots that already hold several active values are repaired first: the newest
(latest `valid_from`, then `created_at`, then id) stays active and each older
one is superseded by it, as the writer would have done, at the newest one's
`valid_from`.

Building the index blocks writes to ns_memories for as long as it takes
(seconds at a million rows).

Revision ID: 0010_one_active_value_per_slot
Revises: 0009_search_vector_given
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_one_active_value_per_slot"
down_revision = "0009_search_vector_given"
branch_labels = None
depends_on = None

_SCOPE = ["tenant", "user_id", "agent_id"]
_ACTIVE_KEYED = sa.text("status = 'active' AND key <> ''")

_NEWEST = """(
    SELECT n.{column} FROM ns_memories AS n
    WHERE n.tenant = ns_memories.tenant AND n.user_id = ns_memories.user_id
      AND n.agent_id = ns_memories.agent_id AND n.key = ns_memories.key
      AND n.status = 'active'
    ORDER BY n.valid_from DESC, n.created_at DESC, n.id DESC
    LIMIT 1
)"""

REPAIR = f"""
UPDATE ns_memories
SET status = 'superseded',
    superseded_by_id = {_NEWEST.format(column="id")},
    superseded_at = {_NEWEST.format(column="valid_from")},
    valid_to = {_NEWEST.format(column="valid_from")},
    version = version + 1
WHERE status = 'active' AND key <> '' AND id <> {_NEWEST.format(column="id")}
"""


def upgrade() -> None:
    op.execute(REPAIR)
    op.create_index(
        "uq_ns_memories_active_slot",
        "ns_memories",
        [*_SCOPE, "key"],
        unique=True,
        postgresql_where=_ACTIVE_KEYED,
        sqlite_where=_ACTIVE_KEYED,
    )


def downgrade() -> None:
    op.drop_index("uq_ns_memories_active_slot", table_name="ns_memories")
