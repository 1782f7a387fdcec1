"""Hot memory: one compact summary per scope, the part of memory a run reads first.

Derived, never authoritative: built from the scope's active instructions,
preferences and goals (best score first, bounded), with the ids it was built
from. Consolidation rebuilds every scope of a tenant; forgetting rebuilds any
summary that was built from a forgotten memory, so no summary outlives its
sources.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, Connection, and_, delete, func, insert, or_, select, true

from memory.loading import HOT_KINDS
from memory.maintenance_tables import hot_summaries
from memory.records import Scope
from memory.tables import ACTIVE_ROW, memories

MAX_ITEMS = 20
MAX_CHARS = 2000


@dataclass(frozen=True, slots=True)
class HotSummary:
    scope: Scope
    content: str
    source_ids: tuple[str, ...]
    built_at: datetime


def read(conn: Connection, scope: Scope) -> list[HotSummary]:
    """The hot summaries `scope` may read: its own layer and those above it."""
    query = select(hot_summaries).where(or_(*(_same_scope(s) for s in scope.readable())))
    rows = conn.execute(query).mappings().all()
    order = {s: i for i, s in enumerate(scope.readable())}
    found = [
        HotSummary(
            Scope(r["tenant"], r["user_id"], r["agent_id"]),
            r["content"],
            tuple(json.loads(r["source_ids"])),
            r["built_at"],
        )
        for r in rows
    ]
    return sorted(found, key=lambda h: order[h.scope])


def rebuild(
    conn: Connection, now: datetime, *, tenant: str | None, scopes: Iterable[Scope] | None = None
) -> int:
    """Rebuild the summaries of `scopes` (all of `tenant`'s when None, every tenant's when
    `tenant` is None too); return how many exist.

    Two statements and an insert, whatever the number of scopes: a ranked read
    (window function, at most MAX_ITEMS per scope) and a replace.
    """
    wanted = None if scopes is None else set(scopes)
    if wanted is not None and not wanted:
        return 0
    if wanted is not None:
        scope_filter: ColumnElement[bool] = or_(*(_same_scope(s) for s in wanted))
    elif tenant is not None:
        scope_filter = hot_summaries.c.tenant == tenant
    else:
        scope_filter = true()
    conn.execute(delete(hot_summaries).where(scope_filter))
    rows = _ranked_rows(conn, tenant, wanted)
    built: dict[Scope, tuple[list[str], list[str]]] = {}
    for row in rows:
        scope = Scope(row["tenant"], row["user_id"], row["agent_id"])
        lines, ids = built.setdefault(scope, ([], []))
        line = f"- [{row['kind']}] {row['content']}"
        if sum(len(x) + 1 for x in lines) + len(line) > MAX_CHARS:
            continue
        lines.append(line)
        ids.append(row["id"])
    values = [
        {
            "tenant": s.tenant,
            "user_id": s.user,
            "agent_id": s.agent,
            "content": "\n".join(lines),
            "source_ids": json.dumps(ids),
            "memory_count": len(ids),
            "built_at": now,
        }
        for s, (lines, ids) in built.items()
        if ids
    ]
    if values:
        conn.execute(insert(hot_summaries), values)
    return len(values)


def scopes_built_from(conn: Connection, tenant: str, ids: Iterable[str]) -> set[Scope]:
    """Scopes whose summary was built from any of `ids`."""
    gone = set(ids)
    if not gone:
        return set()
    query = select(
        hot_summaries.c.tenant,
        hot_summaries.c.user_id,
        hot_summaries.c.agent_id,
        hot_summaries.c.source_ids,
    ).where(hot_summaries.c.tenant == tenant)
    return {
        Scope(r.tenant, r.user_id, r.agent_id)
        for r in conn.execute(query)
        if gone.intersection(json.loads(r.source_ids))
    }


def _ranked_rows(conn: Connection, tenant: str | None, wanted: set[Scope] | None) -> list:
    where = [
        memories.c.tenant == tenant if tenant is not None else true(),
        ACTIVE_ROW,
        memories.c.kind.in_([k.value for k in HOT_KINDS]),
    ]
    if wanted is not None:
        where.append(
            or_(
                *(
                    and_(
                        memories.c.tenant == s.tenant,
                        memories.c.user_id == s.user,
                        memories.c.agent_id == s.agent,
                    )
                    for s in wanted
                )
            )
        )
    rank = (
        func.row_number()
        .over(
            partition_by=(memories.c.tenant, memories.c.user_id, memories.c.agent_id),
            order_by=(memories.c.score.desc(), memories.c.last_reinforced_at.desc(), memories.c.id),
        )
        .label("rank")
    )
    inner = (
        select(
            memories.c.id,
            memories.c.tenant,
            memories.c.user_id,
            memories.c.agent_id,
            memories.c.kind,
            memories.c.content,
            rank,
        )
        .where(*where)
        .subquery()
    )
    query = (
        select(inner)
        .where(inner.c.rank <= MAX_ITEMS)
        .order_by(inner.c.tenant, inner.c.user_id, inner.c.agent_id, inner.c.rank)
    )
    return list(conn.execute(query).mappings())


def _same_scope(scope: Scope) -> ColumnElement[bool]:
    return and_(
        hot_summaries.c.tenant == scope.tenant,
        hot_summaries.c.user_id == scope.user,
        hot_summaries.c.agent_id == scope.agent,
    )
