"""memory: keys are matched folded; a slot is `key_folded`, one active value each

A person's "diet" and an agent's later "Diet" (or "diet ", "ＤＩＥＴ", "diet" with a
zero-width space) were two slots, both active, both loaded into runs: the rule
that a statement is not superseded by an inference never met them. `key_folded`
holds each key as `memory.folding.folded_key` makes it (invisible characters
removed, NFKC, white space collapsed, trimmed, lower-cased; LangGraph item keys
as written), and the slot indexes move onto it: the scope-key index (lookups,
history) and the unique one active value per slot. The key shown stays as written.

Folded in Python, not by `ns_fold` in the database: the writer folds new keys in
Python, and PostgreSQL's `lower` differs from Python's on a rare letter ("İ"),
which would make one key two slots. Each distinct key is folded once, and the
rows take their folded key from a temporary table.

Slots that now hold several active values are settled as the writer would have
settled them (`memory.slot_repair`): their rows replayed in the order written, a
later value superseding the earlier one (linked both ways, `valid_to` and
`superseded_at` the successor's `valid_from`), except that an agent's value
after the person's or the operator's statement goes to the review queue instead.
So the newest trusted value stays active; nothing is deleted; each change is
audited as `migration:0013`, with the rule `same-folded-key`.

Building the indexes blocks writes to ns_memories for as long as it takes
(seconds at a million rows). The downgrade drops the column and puts the indexes
back on `key`; it fails if two active rows in a scope share a key exactly,
which the upgrade's settling cannot have made.

Revision ID: 0013_folded_keys
Revises: 0012_tombstone_memory_ids
Create Date: 2026-12-06
"""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

from memory import slot_repair
from memory.folding import folded_key

revision = "0013_folded_keys"
down_revision = "0012_tombstone_memory_ids"
branch_labels = None
depends_on = None

_SCOPE = ["tenant", "user_id", "agent_id"]
_ACTIVE_KEYED = sa.text("status = 'active' AND key <> ''")
_KEYED = sa.text("key <> ''")
_BATCH = 10_000
ACTOR = "migration:0013"


def upgrade() -> None:
    op.add_column(
        "ns_memories", sa.Column("key_folded", sa.Text(), nullable=False, server_default="")
    )
    conn = op.get_bind()
    _backfill(conn)
    _indexes("key_folded")
    slot_repair.repair(conn, slot_repair.crowded(conn), actor=ACTOR, now=datetime.now(UTC))
    op.create_index(
        "uq_ns_memories_active_slot",
        "ns_memories",
        [*_SCOPE, "key_folded"],
        unique=True,
        postgresql_where=_ACTIVE_KEYED,
        sqlite_where=_ACTIVE_KEYED,
    )


def _backfill(conn: sa.Connection) -> None:
    """Every keyed row's `key_folded`, from a temporary table of each distinct key."""
    conn.exec_driver_sql("CREATE TEMPORARY TABLE ns_key_folds (key TEXT PRIMARY KEY, folded TEXT)")
    folds = sa.table("ns_key_folds", sa.column("key"), sa.column("folded"))
    keys = conn.execute(sa.text("SELECT DISTINCT key FROM ns_memories WHERE key <> ''")).scalars()
    pairs = [{"key": key, "folded": folded_key(key)} for key in keys]
    for start in range(0, len(pairs), _BATCH):
        conn.execute(sa.insert(folds), pairs[start : start + _BATCH])
    conn.exec_driver_sql(
        "UPDATE ns_memories SET key_folded ="
        " (SELECT f.folded FROM ns_key_folds AS f WHERE f.key = ns_memories.key)"
        " WHERE key <> ''"
    )
    conn.exec_driver_sql("DROP TABLE ns_key_folds")


def _indexes(column: str) -> None:
    """The slot indexes on `column`: the scope-key index now, the unique one dropped
    (made again once the slots are settled)."""
    op.drop_index("uq_ns_memories_active_slot", table_name="ns_memories")
    op.drop_index("ix_ns_memories_scope_key", table_name="ns_memories")
    op.create_index(
        "ix_ns_memories_scope_key",
        "ns_memories",
        [*_SCOPE, column],
        postgresql_where=_KEYED,
        sqlite_where=_KEYED,
    )


def downgrade() -> None:
    _indexes("key")
    op.create_index(
        "uq_ns_memories_active_slot",
        "ns_memories",
        [*_SCOPE, "key"],
        unique=True,
        postgresql_where=_ACTIVE_KEYED,
        sqlite_where=_ACTIVE_KEYED,
    )
    # Not a batch (a copy of the table on SQLite, which would lose its full-text triggers).
    op.get_bind().exec_driver_sql("ALTER TABLE ns_memories DROP COLUMN key_folded")
