"""memory: ns_fold(text) and ns_unaccent(text), the forms forgetting compares in

A forget by person or by text compared stored characters, so "Ana", "ana " and a
full-width or decomposed spelling of the same name were different people to it.
`ns_fold` (see `memory.folding`) removes invisible characters, applies NFKC,
makes white space runs one space, trims and lower-cases, in the database;
`ns_unaccent` also drops accents and strokes, for a forget's verification.
PostgreSQL only: SQLite registers the functions on each connection.

Revision ID: 0011_fold_function
Revises: 0010_one_active_value_per_slot
Create Date: 2026-12-05
"""

from __future__ import annotations

from alembic import op

import memory.folding

revision = "0011_fold_function"
down_revision = "0010_one_active_value_per_slot"
branch_labels = None
depends_on = None


def upgrade() -> None:
    memory.folding.create(op.get_bind())


def downgrade() -> None:
    memory.folding.drop(op.get_bind())
