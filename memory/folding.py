"""Texts compared as a reader sees them, in SQL, alike on PostgreSQL and SQLite.

One name can be stored in many spellings that read the same: "Ana", "ana ",
"ＡＮＡ" (full width), "Ana" with a zero-width space in it, "Łukasz Żółw" composed
or decomposed (NFD). A forget that compares stored characters finds one of them,
and its verification, asking the same way, finds nothing left. `ns_fold(text)`
is the form they share: invisible characters removed (`phrasing.INVISIBLE`),
compatibility forms folded (NFKC, which also composes NFD), each run of white
space made one space, the ends trimmed, lower-cased.

It runs in the database, so a forget compares rows where they are instead of
reading a tenant's rows into Python: SQLite calls `folded` (registered on every
connection by `memory.engine`), PostgreSQL a SQL function of the same name and
meaning built from `normalize`, `regexp_replace` and `lower` (migration 0011,
and `create_all`). A query folds both sides of a comparison in the database, so
where the two dialects disagree on a rare letter (PostgreSQL lowers "İ" to "i",
Python to "i̇") each still agrees with itself.

    select(memories.c.id).where(fold(memories.c.subject) == fold(literal("Ana ")))
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import ColumnElement, Connection, Text, event, func

from memory.phrasing import INVISIBLE, as_read
from memory.tables import metadata

SPACES = re.compile("[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
"""A run of white space, as literal characters both Python and PostgreSQL read (their
`\\s` differ: Python's also takes the ASCII separators \\x1c-\\x1f)."""

FUNCTION = "ns_fold"

POSTGRES_DDL = (
    f"CREATE OR REPLACE FUNCTION {FUNCTION}(value text) RETURNS text"
    " LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT lower(btrim(regexp_replace("
    f"normalize(regexp_replace(value, '{INVISIBLE.pattern}', '', 'g'), NFKC),"
    f" '{SPACES.pattern}', ' ', 'g'), ' ')) $$",
)
"""`folded` in SQL. A plain SQL function, so the planner inlines it into the query."""
POSTGRES_DROP = (f"DROP FUNCTION IF EXISTS {FUNCTION}(text)",)


def spelled(text: str) -> str:
    """`text` in the one spelling of what a reader sees (`phrasing.as_read`, white
    space runs made one space, ends trimmed), case kept. How a subject is stored."""
    return SPACES.sub(" ", as_read(text)).strip(" ")


def folded(text: str) -> str:
    """`spelled(text)` lower-cased: what `ns_fold` makes of `text` on SQLite."""
    return spelled(text).lower()


def fold(expression: Any) -> ColumnElement[str]:
    """`ns_fold(expression)`: an SQL text folded as `folded` folds it."""
    return func.ns_fold(expression, type_=Text)


def register_sqlite(dbapi_connection: Any) -> None:
    """Make `ns_fold` callable on a new SQLite connection."""
    dbapi_connection.create_function(FUNCTION, 1, _folded_or_null, deterministic=True)


def create(conn: Connection) -> None:
    """PostgreSQL only: create `ns_fold` (a no-op on SQLite, where it is registered)."""
    if conn.dialect.name == "postgresql":
        for statement in POSTGRES_DDL:
            conn.exec_driver_sql(statement)


def drop(conn: Connection) -> None:
    if conn.dialect.name == "postgresql":
        for statement in POSTGRES_DROP:
            conn.exec_driver_sql(statement)


def _folded_or_null(value: object) -> object:
    return folded(value) if isinstance(value, str) else value


event.listen(metadata, "after_create", lambda target, conn, **kw: create(conn))
event.listen(metadata, "before_drop", lambda target, conn, **kw: drop(conn))
