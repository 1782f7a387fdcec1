"""The deleting half of forgetting: list what goes, delete it, rebuild what carried it.

`listing` finds the matching rows (bounded by a limit, so a listing can be
partial) and follows superseded versions and, where asked, merged contributors;
`remove` deletes them in the caller's transaction and rebuilds whatever carried
their text — merged memories (another contributor takes over), episode summaries
(rewritten from what remains) and hot summaries — and marks their audit rows
redacted. `compact_fulltext` then makes deleted text leave the full-text
structures too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, Engine, and_, delete, or_, select, update

from memory import hot, write_audit
from memory.maintenance_tables import memory_links
from memory.records import Scope, Status
from memory.tables import audit, memories

_CHUNK = 500
COMPACTED = "compacted"


@dataclass
class Listing:
    listed: int
    truncated: bool
    delete: set[str]
    skipped: int


def remove(
    conn: Connection, doomed: set[str], tenant: str, now: datetime
) -> tuple[set[str], dict[str, int]]:
    """Delete `doomed` and rebuild what carried it: merges, episode summaries, hot memory.
    On SQLite the pages the rows free are zeroed (`secure_delete`), not left readable
    in the file."""
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql("PRAGMA secure_delete=ON")
    rebuilt = {"merged": _promote_contributors(conn, doomed)}
    scopes = _scopes_of(conn, doomed) | hot.scopes_built_from(conn, tenant, doomed)
    summaries = _summaries_fed_by(conn, doomed)
    deleted = _delete_rows(conn, doomed)
    _drop_links(conn, deleted)
    rebuilt["summaries"] = _rebuild_summaries(conn, summaries, now)
    _redact_audit(conn, deleted)
    rebuilt["hot"] = len(scopes)
    if scopes:
        hot.rebuild(conn, now, tenant=tenant, scopes=scopes)
    return deleted, rebuilt


def listing(
    conn: Connection,
    where: ColumnElement[bool],
    allowed: ColumnElement[bool],
    limit: int,
    contributors_too: bool,
    whole_rows: bool,
) -> Listing:
    c = memories.c
    matched = matching(where, whole_rows)
    query = select(c.id, allowed.label("allowed")).where(matched).order_by(c.id).limit(limit + 1)
    rows = conn.execute(query).all()
    truncated = len(rows) > limit
    rows = rows[:limit]
    keep = {r.id for r in rows if r.allowed}
    extra = _expand(conn, keep, allowed, contributors_too)
    listed = len(rows) + len(extra["all"])
    delete_ids = keep | extra["allowed"]
    return Listing(listed, truncated, delete_ids, listed - len(delete_ids))


def matching(where: ColumnElement[bool], whole_rows: bool) -> ColumnElement[bool]:
    """The rows a forget lists: `where`, less episode summaries unless rows are
    addressed whole (a summary is rebuilt from the episodes that remain, not matched)."""
    if whole_rows:
        return where
    summaries = select(memory_links.c.target_id).where(memory_links.c.rule == COMPACTED)
    return and_(where, memories.c.id.not_in(summaries))


def _expand(
    conn: Connection, start: set[str], allowed: ColumnElement[bool], contributors_too: bool
) -> dict[str, set[str]]:
    """Superseded versions (and, for forget by id, merged contributors), level by level."""
    seen, found, ok = set(start), set(), set()
    frontier = set(start)
    linked_sources = select(memory_links.c.source_id)
    while frontier:
        nxt: set[str] = set()
        for chunk in chunks(frontier):
            versions = select(memories.c.id, allowed.label("allowed")).where(
                memories.c.superseded_by_id.in_(chunk),
                memories.c.id.not_in(linked_sources),
            )
            rows = list(conn.execute(versions))
            if contributors_too:
                contributors = select(memories.c.id, allowed.label("allowed")).where(
                    memories.c.id.in_(
                        select(memory_links.c.source_id).where(memory_links.c.target_id.in_(chunk))
                    )
                )
                rows += list(conn.execute(contributors))
            for row in rows:
                if row.id in seen:
                    continue
                seen.add(row.id)
                found.add(row.id)
                if row.allowed:
                    ok.add(row.id)
                    nxt.add(row.id)
        frontier = nxt
    return {"all": found, "allowed": ok}


def contents_of(conn: Connection, ids: set[str]) -> set[str]:
    out: set[str] = set()
    for chunk in chunks(ids):
        out.update(
            conn.execute(select(memories.c.content).where(memories.c.id.in_(chunk))).scalars()
        )
    return out


def _scopes_of(conn: Connection, ids: set[str]) -> set[Scope]:
    out: set[Scope] = set()
    for chunk in chunks(ids):
        query = (
            select(memories.c.tenant, memories.c.user_id, memories.c.agent_id)
            .where(memories.c.id.in_(chunk))
            .distinct()
        )
        out.update(Scope(r.tenant, r.user_id, r.agent_id) for r in conn.execute(query))
    return out


def _promote_contributors(conn: Connection, doomed: set[str]) -> int:
    """A merged memory being forgotten hands over to its newest surviving contributor."""
    if not doomed:
        return 0
    groups: dict[str, list[tuple[datetime, str]]] = {}
    for chunk in chunks(doomed):
        query = (
            select(memory_links.c.target_id, memories.c.id, memories.c.created_at)
            .join(memories, memories.c.id == memory_links.c.source_id)
            .where(memory_links.c.target_id.in_(chunk), memory_links.c.rule != COMPACTED)
        )
        for row in conn.execute(query):
            if row.id not in doomed:
                groups.setdefault(row.target_id, []).append((row.created_at, row.id))
    for target, contributors in groups.items():
        heir = max(contributors)[1]
        others = [i for _, i in contributors if i != heir]
        conn.execute(
            update(memories)
            .where(memories.c.id == heir)
            .values(
                status=Status.ACTIVE.value,
                superseded_by_id=None,
                superseded_at=None,
                valid_to=None,
                version=memories.c.version + 1,
            )
        )
        conn.execute(
            delete(memory_links).where(
                memory_links.c.source_id == heir, memory_links.c.target_id == target
            )
        )
        if others:
            conn.execute(
                update(memories).where(memories.c.id.in_(others)).values(superseded_by_id=heir)
            )
            conn.execute(
                update(memory_links)
                .where(memory_links.c.target_id == target, memory_links.c.source_id.in_(others))
                .values(target_id=heir)
            )
    return len(groups)


def _summaries_fed_by(conn: Connection, ids: set[str]) -> set[str]:
    out: set[str] = set()
    for chunk in chunks(ids):
        query = select(memory_links.c.target_id).where(
            memory_links.c.rule == COMPACTED, memory_links.c.source_id.in_(chunk)
        )
        out.update(conn.execute(query).scalars())
    return out - ids


def _delete_rows(conn: Connection, ids: set[str]) -> set[str]:
    out: set[str] = set()
    for chunk in chunks(ids):
        result = conn.execute(
            delete(memories).where(memories.c.id.in_(chunk)).returning(memories.c.id)
        )
        out.update(result.scalars())
    return out


def _drop_links(conn: Connection, ids: set[str]) -> None:
    for chunk in chunks(ids):
        conn.execute(
            delete(memory_links).where(
                or_(memory_links.c.source_id.in_(chunk), memory_links.c.target_id.in_(chunk))
            )
        )


def _rebuild_summaries(conn: Connection, summaries: set[str], now: datetime) -> int:
    """Rewrite each episode summary from the episodes it still has; delete it if none."""
    from memory.consolidation import summary_text  # one formatter for build and rebuild

    for summary_id in summaries:
        query = (
            select(memories.c.content, memories.c.created_at)
            .join(memory_links, memory_links.c.source_id == memories.c.id)
            .where(memory_links.c.target_id == summary_id)
            .order_by(memories.c.created_at, memories.c.id)
        )
        rows = list(conn.execute(query))
        if not rows:
            conn.execute(delete(memories).where(memories.c.id == summary_id))
            conn.execute(delete(memory_links).where(memory_links.c.target_id == summary_id))
            continue
        content = summary_text([(r.created_at, r.content) for r in rows])
        from memory.records import content_hash

        conn.execute(
            update(memories)
            .where(memories.c.id == summary_id)
            .values(
                content=content, content_hash=content_hash(content), version=memories.c.version + 1
            )
        )
    return len(summaries)


def _redact_audit(conn: Connection, ids: set[str]) -> None:
    """Mark the audit rows that name the deleted memories: their own entries, and the
    writer's rows that hold an apply's entries (`memory.write_audit`)."""
    for chunk in chunks(ids):
        named = or_(audit.c.memory_id.in_(chunk), write_audit.naming(chunk, conn.dialect.name))
        conn.execute(update(audit).where(named).values(redacted=True))


def compact_fulltext(engine: Engine) -> tuple[str, ...]:
    """Make deleted text leave the full-text structures, not just the visible rows."""
    if engine.dialect.name == "sqlite":
        with engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO ns_memories_fts(ns_memories_fts) VALUES('optimize')")
        with engine.connect() as conn:
            raw = conn.connection.dbapi_connection
            assert raw is not None
            busy, _, _ = raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        return (
            () if not busy else ("WAL checkpoint was blocked by a reader; retried on next forget",)
        )
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ns_memories")
    return ()


def chunks(ids: Iterable[str]) -> Iterable[list[str]]:
    items: Sequence[str] = sorted(ids)
    for start in range(0, len(items), _CHUNK):
        yield list(items[start : start + _CHUNK])
