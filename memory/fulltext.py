"""Full-text search, the one place where PostgreSQL and SQLite differ.

PostgreSQL: a stored `search_vector` (to_tsvector of the content, kept by a trigger),
a GIN index on it, and `ts_rank` over it.
SQLite: an FTS5 table kept in step with `ns_memories` by triggers, ranked by bm25.

Goals and triggers are prose, so a query is the OR of its words: a memory that
shares any word is a candidate, and the rank orders them. Words are reduced to
`[a-z0-9]` before they reach either query language, so no user text is ever
parsed as query syntax.
"""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Float,
    FromClause,
    String,
    bindparam,
    column,
    event,
    func,
    literal_column,
    text,
)
from sqlalchemy.sql import Select

from memory.tables import memories, metadata

MAX_TERMS = 32
_WORD = re.compile(r"[^\W_]{2,}")
"""A word: two or more letters or digits of any script ("müller", "zürich", "東京");
never a character the query languages read as an operator."""
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "that",
        "this",
        "from",
        "are",
        "was",
        "were",
        "will",
        "have",
        "has",
        "not",
        "but",
        "you",
        "your",
        "our",
        "its",
        "into",
        "out",
        "all",
        "any",
        "can",
        "new",
        "one",
    ]
)

SQLITE_DDL = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS ns_memories_fts USING fts5("
    "content, memory_id UNINDEXED, tokenize='porter unicode61')",
    "CREATE TRIGGER IF NOT EXISTS ns_memories_fts_ai AFTER INSERT ON ns_memories BEGIN "
    "INSERT INTO ns_memories_fts(content, memory_id) VALUES (new.content, new.id); END",
    "CREATE TRIGGER IF NOT EXISTS ns_memories_fts_ad AFTER DELETE ON ns_memories BEGIN "
    "DELETE FROM ns_memories_fts WHERE memory_id = old.id; END",
    "CREATE TRIGGER IF NOT EXISTS ns_memories_fts_au AFTER UPDATE OF content ON ns_memories "
    "BEGIN UPDATE ns_memories_fts SET content = new.content WHERE memory_id = old.id; END",
)
SQLITE_DROP = (
    "DROP TRIGGER IF EXISTS ns_memories_fts_au",
    "DROP TRIGGER IF EXISTS ns_memories_fts_ad",
    "DROP TRIGGER IF EXISTS ns_memories_fts_ai",
    "DROP TABLE IF EXISTS ns_memories_fts",
)
POSTGRES_DDL = (
    "CREATE INDEX IF NOT EXISTS ix_ns_memories_fts ON ns_memories "
    "USING gin (to_tsvector('english', content))",
)
POSTGRES_DROP = ("DROP INDEX IF EXISTS ix_ns_memories_fts",)

POSTGRES_VECTOR_DDL = (
    "CREATE OR REPLACE FUNCTION ns_memories_search_vector() RETURNS trigger AS $$ "
    "BEGIN NEW.search_vector := to_tsvector('english', NEW.content); RETURN NEW; END "
    "$$ LANGUAGE plpgsql",
    "DROP TRIGGER IF EXISTS ns_memories_search_vector ON ns_memories",
    "CREATE TRIGGER ns_memories_search_vector BEFORE INSERT OR UPDATE OF content "
    "ON ns_memories FOR EACH ROW EXECUTE FUNCTION ns_memories_search_vector()",
    "UPDATE ns_memories SET search_vector = to_tsvector('english', content) "
    "WHERE search_vector IS NULL",
    "DROP INDEX IF EXISTS ix_ns_memories_fts",
    "CREATE INDEX IF NOT EXISTS ix_ns_memories_fts ON ns_memories USING gin (search_vector)",
)
"""Revision 0002_memory: the stored vector, its trigger, and the GIN index moved onto it."""

POSTGRES_ACTIVE_INDEX = (
    "DROP INDEX IF EXISTS ix_ns_memories_fts",
    "CREATE INDEX ix_ns_memories_fts ON ns_memories USING gin (search_vector) "
    "WHERE status = 'active'",
)
"""Revision 0007_fts_active_only: only active rows are searched, so only they are
indexed. A row leaving `active` (superseded, merged, expired) is written as a new
row version, which then gets no GIN entries: the index was the dearest part of
expiry, supersession and consolidation. Searches carry `status = 'active'` as a
literal (`memory.tables.ACTIVE_ROW`), so the planner can use the partial index."""

SEARCH_VECTOR = "to_tsvector('english', content)"
"""What `search_vector` holds: the expression a writer may compute as it inserts."""

POSTGRES_VECTOR_GIVEN = (
    "DROP TRIGGER IF EXISTS ns_memories_search_vector ON ns_memories",
    "DROP TRIGGER IF EXISTS ns_memories_search_vector_missing ON ns_memories",
    "CREATE TRIGGER ns_memories_search_vector BEFORE UPDATE OF content "
    "ON ns_memories FOR EACH ROW EXECUTE FUNCTION ns_memories_search_vector()",
    "CREATE TRIGGER ns_memories_search_vector_missing BEFORE INSERT ON ns_memories "
    "FOR EACH ROW WHEN (NEW.search_vector IS NULL) EXECUTE FUNCTION ns_memories_search_vector()",
)
"""Revision 0009_search_vector_given: an INSERT that brings the vector keeps it. The
memory writer computes `SEARCH_VECTOR` in its INSERT (`memory.pending`), which
spares each row a PL/pgSQL call; the trigger fills it for any INSERT that leaves
it out, and every change of content recomputes it as before."""

FULLTEXT_TABLES = frozenset(
    {
        "ns_memories_fts",
        *(f"ns_memories_fts_{s}" for s in ("data", "idx", "content", "docsize", "config")),
    }
)
"""Tables FTS5 creates behind the scenes; schema comparison leaves them out."""


def create(conn: Connection) -> None:
    """Create the dialect's full-text structures (used by create_all and by the migration)."""
    for statement in POSTGRES_DDL if _is_postgres(conn) else SQLITE_DDL:
        conn.exec_driver_sql(statement)


def create_stored_vector(conn: Connection) -> None:
    """PostgreSQL only: fill `search_vector` by trigger and index it (a no-op on SQLite)."""
    if _is_postgres(conn):
        for statement in POSTGRES_VECTOR_DDL:
            conn.exec_driver_sql(statement)


def index_active_only(conn: Connection) -> None:
    """PostgreSQL only: the GIN index over active rows alone (a no-op on SQLite)."""
    if _is_postgres(conn):
        for statement in POSTGRES_ACTIVE_INDEX:
            conn.exec_driver_sql(statement)


def vector_given(conn: Connection) -> None:
    """PostgreSQL only: the trigger computes `search_vector` only when an INSERT
    leaves it out (a no-op on SQLite)."""
    if _is_postgres(conn):
        for statement in POSTGRES_VECTOR_GIVEN:
            conn.exec_driver_sql(statement)


def drop(conn: Connection) -> None:
    for statement in POSTGRES_DROP if _is_postgres(conn) else SQLITE_DROP:
        conn.exec_driver_sql(statement)


def terms(prose: str) -> list[str]:
    """The searchable words of `prose`, lower-cased, de-duplicated, bounded."""
    words = (w for w in _WORD.findall(prose.lower()) if w not in _STOP)
    return list(dict.fromkeys(words))[:MAX_TERMS]


def match_text(words: list[str], dialect: str) -> str:
    """The query-language string for `words` (any of them), for the `match` parameter."""
    if dialect == "postgresql":
        return " | ".join(words)
    return " OR ".join(f'"{w}"' for w in words)


def with_relevance_param(query: Select, dialect: str) -> Select:
    """`query` over ns_memories with a `relevance` column (0 when nothing matches),
    the words left as the bound parameter `match` (see `match_text`).

    The statement's shape no longer depends on the words, so it is built once and
    reused: SQLAlchemy then skips compiling it, which is most of a small query's cost.
    """
    match = bindparam("match", type_=String)
    if dialect == "postgresql":
        vector = memories.c.search_vector
        rank: ColumnElement[float] = func.ts_rank(vector, func.to_tsquery("english", match))
        return query.add_columns(rank.label("relevance"))
    fts = (
        text(
            "SELECT memory_id, -bm25(ns_memories_fts) AS rel FROM ns_memories_fts "
            "WHERE ns_memories_fts MATCH :match"
        )
        .bindparams(match)
        .columns(column("memory_id", String), column("rel", Float))
        .subquery("fts")
    )
    return query.outerjoin(fts, fts.c.memory_id == memories.c.id).add_columns(
        func.coalesce(fts.c.rel, 0.0).label("relevance")
    )


def relevance_order() -> Any:
    """ORDER BY term for the `relevance` column that `ranked`/`matching` add."""
    return literal_column("relevance").desc()


def matching(query: Select, words: list[str], dialect: str) -> Select:
    """`query` restricted to memories matching any of `words`, with `relevance`."""
    if dialect == "postgresql":
        ts_query = func.to_tsquery("english", " | ".join(words))
        vector = memories.c.search_vector
        return query.where(vector.op("@@")(ts_query)).add_columns(
            func.ts_rank(vector, ts_query).label("relevance")
        )
    fts = _sqlite_matches(" OR ".join(f'"{w}"' for w in words))
    return query.join(fts, fts.c.memory_id == memories.c.id).add_columns(
        fts.c.rel.label("relevance")
    )


def _sqlite_matches(match: str) -> FromClause:
    return (
        text(
            "SELECT memory_id, -bm25(ns_memories_fts) AS rel FROM ns_memories_fts "
            "WHERE ns_memories_fts MATCH :match"
        )
        .bindparams(match=match)
        .columns(column("memory_id", String), column("rel", Float))
        .subquery("fts")
    )


def _is_postgres(conn: Connection) -> bool:
    return conn.dialect.name == "postgresql"


def _after_create(target: object, conn: Connection, **kw: object) -> None:
    create(conn)
    create_stored_vector(conn)
    index_active_only(conn)
    vector_given(conn)


event.listen(metadata, "after_create", _after_create)
event.listen(metadata, "before_drop", lambda target, conn, **kw: drop(conn))
