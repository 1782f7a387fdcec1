"""Named queries over the memory tables. Every read takes the reader's scope and
filters by `readable()` inside the SQL, so isolation never depends on the caller.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    RowMapping,
    and_,
    insert,
    literal_column,
    or_,
    select,
    update,
)

from memory import fulltext
from memory.receipts import Decision, WriteReceipt
from memory.records import Candidate, Kind, Memory, Scope, Status, content_hash
from memory.tables import audit, memories, receipts


def in_scope(scope: Scope) -> ColumnElement[bool]:
    """Rows of exactly this scope."""
    return and_(
        memories.c.tenant == scope.tenant,
        memories.c.user_id == scope.user,
        memories.c.agent_id == scope.agent,
    )


def readable_by(scope: Scope) -> ColumnElement[bool]:
    """Rows of this scope and the layers above it: never below, never sideways."""
    return or_(*(in_scope(s) for s in scope.readable()))


def loadable(now: datetime, min_score: float) -> ColumnElement[bool]:
    """Active, not past valid_to, not voted below the bar."""
    return and_(
        memories.c.status == Status.ACTIVE.value,
        or_(memories.c.valid_to.is_(None), memories.c.valid_to > now),
        memories.c.score >= min_score,
    )


def by_idempotency_key(conn: Connection, scope: Scope, key: str) -> RowMapping | None:
    query = select(memories).where(in_scope(scope), memories.c.idempotency_key == key)
    return conn.execute(query).mappings().first()


def active_by_key(conn: Connection, scope: Scope, key: str) -> RowMapping | None:
    query = select(memories).where(
        in_scope(scope), memories.c.key == key, memories.c.status == Status.ACTIVE.value
    )
    return conn.execute(query).mappings().first()


def insert_memory(
    conn: Connection,
    candidate: Candidate,
    kind: Kind,
    status: Status,
    now: datetime,
    supersedes_id: str | None = None,
) -> str:
    memory_id = str(uuid.uuid4())
    p = candidate.provenance
    conn.execute(
        insert(memories).values(
            id=memory_id,
            tenant=candidate.scope.tenant,
            user_id=candidate.scope.user,
            agent_id=candidate.scope.agent,
            kind=kind.value,
            key=candidate.key,
            content=candidate.content,
            content_hash=content_hash(candidate.content),
            status=status.value,
            source=p.source.value,
            confidence=p.confidence,
            reference=p.reference or candidate.evidence,
            run_id=p.run_id,
            task_id=p.task_id,
            agent=p.agent,
            subagent=p.subagent,
            schedule=p.schedule,
            subject=p.subject,
            idempotency_key=candidate.effective_idempotency_key(),
            version=1,
            score=1.0,
            created_at=now,
            valid_from=now,
            valid_to=candidate.valid_to,
            supersedes_id=supersedes_id,
            last_reinforced_at=now,
        )
    )
    return memory_id


def replace_content(conn: Connection, memory_id: str, candidate: Candidate, kind: Kind) -> None:
    conn.execute(
        update(memories)
        .where(memories.c.id == memory_id)
        .values(
            content=candidate.content,
            content_hash=content_hash(candidate.content),
            kind=kind.value,
            version=memories.c.version + 1,
        )
    )


def mark_superseded(conn: Connection, old_id: str, new_id: str, now: datetime) -> None:
    conn.execute(
        update(memories)
        .where(memories.c.id == old_id)
        .values(
            status=Status.SUPERSEDED.value,
            superseded_at=now,
            valid_to=now,
            superseded_by_id=new_id,
            version=memories.c.version + 1,
        )
    )


def record_audit(
    conn: Connection, rows: Iterable[dict[str, Any]], *, actor: str, tenant: str, now: datetime
) -> None:
    values = [
        {
            "at": now,
            "actor": actor,
            "tenant": tenant,
            "action": r["action"],
            "memory_id": r.get("memory_id"),
            "detail": json.dumps(r.get("detail", {})),
        }
        for r in rows
    ]
    if values:
        conn.execute(insert(audit), values)


def save_receipt(conn: Connection, receipt: WriteReceipt) -> None:
    conn.execute(
        insert(receipts).values(
            handle=receipt.handle,
            tenant=receipt.tenant,
            run_id=receipt.run_id,
            created_at=receipt.created_at,
            decisions=receipt.decisions_json(),
        )
    )


def get_receipt(conn: Connection, handle: str) -> WriteReceipt | None:
    row = conn.execute(select(receipts).where(receipts.c.handle == handle)).mappings().first()
    if row is None:
        return None
    return WriteReceipt(
        handle=row["handle"],
        tenant=row["tenant"],
        run_id=row["run_id"],
        created_at=row["created_at"],
        decisions=tuple(Decision.from_json(d) for d in json.loads(row["decisions"])),
    )


def ranking_pool(
    conn: Connection,
    scope: Scope,
    words: list[str],
    now: datetime,
    *,
    min_score: float,
    kinds: Sequence[Kind],
    pool: int,
) -> list[tuple[Memory, float]]:
    """Loadable memories readable by `scope`, most relevant first, then most recent."""
    query = select(memories).where(
        readable_by(scope),
        loadable(now, min_score),
        memories.c.kind.in_([k.value for k in kinds]),
    )
    query = fulltext.with_relevance(query, words, conn.dialect.name)
    query = query.order_by(
        fulltext_order(), memories.c.last_reinforced_at.desc(), memories.c.id
    ).limit(pool)
    return [(Memory.from_row(r), float(r["relevance"])) for r in conn.execute(query).mappings()]


def fulltext_order() -> Any:
    return literal_column("relevance").desc()


def search(
    conn: Connection, scope: Scope, words: list[str], now: datetime, *, limit: int, min_score: float
) -> list[tuple[Memory, float]]:
    if not words:
        return []
    query = select(memories).where(readable_by(scope), loadable(now, min_score))
    query = fulltext.matching(query, words, conn.dialect.name)
    query = query.order_by(fulltext_order(), memories.c.last_reinforced_at.desc()).limit(limit)
    return [(Memory.from_row(r), float(r["relevance"])) for r in conn.execute(query).mappings()]


def listing(
    conn: Connection, scope: Scope, *, statuses: Sequence[Status] | None, limit: int
) -> list[Memory]:
    query = select(memories).where(readable_by(scope))
    if statuses is not None:
        query = query.where(memories.c.status.in_([s.value for s in statuses]))
    query = query.order_by(memories.c.created_at.desc(), memories.c.id).limit(limit)
    return [Memory.from_row(r) for r in conn.execute(query).mappings()]


def history(conn: Connection, scope: Scope, key: str) -> list[Memory]:
    query = (
        select(memories)
        .where(readable_by(scope), memories.c.key == key)
        .order_by(memories.c.valid_from, memories.c.created_at)
    )
    return [Memory.from_row(r) for r in conn.execute(query).mappings()]


def by_ids(conn: Connection, scope: Scope, ids: Sequence[str]) -> list[Memory]:
    if not ids:
        return []
    query = select(memories).where(readable_by(scope), memories.c.id.in_(list(ids)))
    return [Memory.from_row(r) for r in conn.execute(query).mappings()]
