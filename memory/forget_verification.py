"""The proving half of forgetting: after a delete, look again in every place.

`relist` counts what is left of the deleted memories by id (rows, links, audit
rows not redacted, SQLite's FTS5 rows, hot summaries built from them) and by text
(hot summaries, audit details, receipts, memories, the full-text table and any
extra `TextPlace`), in each of its spellings (JSON-escaped too), skipping texts
another surviving memory still holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import ColumnElement, Connection, Engine, func, or_, select

from memory import hot, write_audit
from memory.forget_places import TextPlace, count_holding, holding
from memory.forget_removal import chunks
from memory.maintenance_tables import hot_summaries, memory_links
from memory.tables import audit, memories, receipts


def relist(
    engine: Engine,
    tenant: str,
    deleted: set[str],
    texts: set[str],
    verify_texts: int,
    extra: Sequence[TextPlace] = (),
) -> tuple[dict[str, int], tuple[str, ...]]:
    """Look for what was deleted in every place it could have been."""
    places = dict.fromkeys(("memories", "fulltext", "links", "hot", "audit", "receipts"), 0)
    places.update(dict.fromkeys((p.name for p in extra), 0))
    notes: list[str] = []
    with engine.connect() as conn:
        for chunk in chunks(deleted):
            places["memories"] += _scalar(
                conn, select(func.count()).where(memories.c.id.in_(chunk))
            )
            places["links"] += _scalar(
                conn,
                select(func.count())
                .select_from(memory_links)
                .where(
                    or_(memory_links.c.source_id.in_(chunk), memory_links.c.target_id.in_(chunk))
                ),
            )
            places["audit"] += _scalar(
                conn,
                select(func.count())
                .select_from(audit)
                .where(
                    or_(
                        audit.c.memory_id.in_(chunk),
                        write_audit.naming(chunk, conn.dialect.name),
                    ),
                    audit.c.redacted.is_(False),
                ),
            )
            if conn.dialect.name == "sqlite":
                marks = ",".join("?" * len(chunk))
                places["fulltext"] += conn.exec_driver_sql(
                    f"SELECT count(*) FROM ns_memories_fts WHERE memory_id IN ({marks})",
                    tuple(chunk),
                ).scalar_one()
        places["hot"] += len(hot.scopes_built_from(conn, tenant, deleted))
        gone = [t for t in texts if not still_held(conn, tenant, t)]
        if len(gone) > verify_texts:
            notes.append(f"content scan checked {verify_texts} of {len(gone)} deleted texts")
        for text in gone[:verify_texts]:
            places["hot"] += _contains(
                conn, hot_summaries.c.content, text, hot_summaries.c.tenant == tenant
            )
            places["audit"] += _contains(conn, audit.c.detail, text, audit.c.tenant == tenant)
            places["receipts"] += _contains(
                conn, receipts.c.decisions, text, receipts.c.tenant == tenant
            )
            places["memories"] += _contains(
                conn, memories.c.content, text, memories.c.tenant == tenant
            )
            for place in extra:
                places[place.name] += count_holding(conn, place, tenant, text)
            if conn.dialect.name == "sqlite":
                places["fulltext"] += conn.exec_driver_sql(
                    "SELECT count(*) FROM ns_memories_fts WHERE instr(lower(content), lower(?)) > 0",
                    (text,),
                ).scalar_one()
    return places, tuple(notes)


def still_held(conn: Connection, tenant: str, text: str) -> bool:
    """Another memory, not forgotten, holds the same text (e.g. another person's)."""
    query = select(memories.c.id).where(memories.c.tenant == tenant, memories.c.content == text)
    return conn.execute(query.limit(1)).first() is not None


def _contains(conn: Connection, column: Any, text: str, where: ColumnElement[bool]) -> int:
    return _scalar(conn, select(func.count()).where(where, holding([column], [text])))


def count_where(engine: Engine, where: ColumnElement[bool]) -> int:
    with engine.connect() as conn:
        return _scalar(conn, select(func.count()).where(where))


def _scalar(conn: Connection, query: Any) -> int:
    return int(conn.execute(query).scalar_one())
