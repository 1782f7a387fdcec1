"""memory: ns_unconfuse(text), look-alike letters of other scripts read as Latin

A forget by person or by text left the spellings of a name that use Cyrillic or
Greek letters passing for Latin ones ("Аna Petrova" with a Cyrillic А), and its
re-count, asking the same way, reported none left. `ns_unconfuse` (see
`memory.folding`) is `ns_fold` reading those letters as the Latin ones
(`memory.phrasing.CONFUSABLES`); `ns_unaccent` is now built on it.
PostgreSQL only: SQLite registers the functions on each connection.

Revision ID: 0018_unconfuse_function
Revises: 0017_runs_lost
Create Date: 2026-12-07
"""

from __future__ import annotations

from alembic import op

import memory.folding

revision = "0018_unconfuse_function"
down_revision = "0017_runs_lost"
branch_labels = None
depends_on = None

_UNACCENT_ON_FOLD = (
    "CREATE OR REPLACE FUNCTION ns_unaccent(value text) RETURNS text"
    " LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT translate(regexp_replace("
    f"normalize(ns_fold(value), NFKD), '{memory.folding.MARKS.pattern}', '', 'g'), 'łøđħıŧ',"
    " 'lodhit') $$"
)
"""`ns_unaccent` as 0011 made it, for the downgrade."""


def upgrade() -> None:
    memory.folding.create(op.get_bind())


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        bind.exec_driver_sql(_UNACCENT_ON_FOLD)
        bind.exec_driver_sql("DROP FUNCTION IF EXISTS ns_unconfuse(text)")
