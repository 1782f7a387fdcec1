"""Consolidation: merge duplicates, supersede replaced facts, compact old episodes,
rebuild hot summaries — without ever losing a write that lands meanwhile.

Two steps, so the slow part holds no locks:

1. `plan` (memory.consolidation_plan) reads one consistent snapshot and decides,
   by id and with the version it saw, which memory absorbs which and which old
   episodes fold into a summary.
2. `apply` writes the plan in one transaction against fresh rows: a memory is
   absorbed only if it is still active at the version planned and its survivor
   is still active; anything that changed is skipped, and anything written after
   the snapshot is not in the plan at all. Absorbed memories stay as superseded
   rows that name their successor, and `ns_memory_links` keeps the provenance of
   every contributor. The invariants (no active memory disappears without an
   active successor that names it; counts add up) are checked inside the
   transaction; a violation rolls everything back.
"""

from __future__ import annotations

import json
import uuid
from collections import deque
from collections.abc import Callable, Generator, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    Connection,
    Engine,
    and_,
    bindparam,
    delete,
    exists,
    func,
    insert,
    select,
    union,
    update,
)
from sqlalchemy import text as sql_text

from memory import hot
from memory.consolidation_plan import (
    COMPACT_AFTER,
    DEFAULT_SIMILARITY,
    MIN_EPISODES,
    Compaction,
    InvariantViolation,
    Merge,
    Plan,
    iter_plans,
    plan,
    plan_all,
    snapshot,
    summary_text,
)
from memory.engine import retrying
from memory.maintenance_tables import maintenance_passes, memory_links
from memory.records import SOURCE_CONFIDENCE, Kind, Status, content_hash
from memory.tables import ACTIVE_ROW, Timestamp, audit, memories

PLAN_AHEAD = True  # plan the next tenants while the previous one is applied (PostgreSQL)
PLANS_AHEAD = 32  # plans ready or being made at most, while one is applied

__all__ = [
    "COMPACT_AFTER",
    "DEFAULT_SIMILARITY",
    "MIN_EPISODES",
    "Compaction",
    "ConsolidationReport",
    "InvariantViolation",
    "Merge",
    "Plan",
    "apply",
    "consolidate",
    "plan",
    "plan_all",
    "snapshot",
    "summary_text",
]


@dataclass(frozen=True, slots=True)
class ConsolidationReport:
    tenant: str
    planned: dict[str, int]
    merged: int
    compacted: int  # episodes folded into summaries
    summaries: int
    skipped: int  # planned, but the row changed since the snapshot
    hot_rebuilt: int
    active_before: int  # in the snapshot
    active_after: int  # the snapshot's, after this pass (writes landing meanwhile not counted)
    dry_run: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["notes"] = list(self.notes)
        return out


def consolidate(
    engine: Engine,
    tenant: str | None,
    now: datetime,
    *,
    dry_run: bool = False,
    progress: Callable[[str], None] = lambda tenant: None,
    **options: Any,
) -> tuple[list[tuple[Plan, ConsolidationReport | None]], int]:
    """Plan every tenant (or one) against one snapshot, then apply tenant by tenant.

    Planning reads the table in a few whole-table passes, in tenant order, however
    many tenants there are (on PostgreSQL ahead of the applying, in a thread);
    each tenant's plan is applied in its own transaction, retried whole
    on a deadlock or serialization failure (applying by id against fresh rows is
    safe at any time, so the plan is not re-made). Hot summaries are rebuilt
    once at the end, in one statement. Returns each tenant's plan and report
    (None on a dry run) and how many hot summaries exist afterwards.
    """
    out: list[tuple[Plan, ConsolidationReport | None]] = []
    # closing(): on an error the planner thread and the snapshot end here, not at GC.
    with closing(_planned(engine, now, tenant, ahead=not dry_run, options=options)) as plans:
        for planned in plans:
            report = None if dry_run else _apply_retrying(engine, planned, now)
            out.append((planned, report))
            progress(planned.tenant)
    hot_summaries = 0
    if not dry_run and out:
        with engine.begin() as conn:
            hot_summaries = hot.rebuild(conn, now, tenant=tenant)
    return out, hot_summaries


def _planned(
    engine: Engine, now: datetime, tenant: str | None, *, ahead: bool, options: dict[str, Any]
) -> Generator[Plan, None, None]:
    """Each tenant's plan, all from one snapshot.

    On PostgreSQL the planner runs up to PLANS_AHEAD tenants ahead in a thread
    while the caller applies the previous plan: planning is mostly Python work here
    and applying is mostly the database's, so the two overlap instead of adding up
    (memory holds at most PLANS_AHEAD tenants' plans). The snapshot stays open
    meanwhile, which is safe because applying works by id against fresh rows.
    SQLite (one writer, and a long read would hold its WAL) plans first.
    """
    if not (ahead and PLAN_AHEAD) or engine.dialect.name != "postgresql":
        with snapshot(engine) as conn:
            made = list(iter_plans(conn, now, tenant=tenant, **options))
        yield from made
        return
    with (
        snapshot(engine) as conn,
        ThreadPoolExecutor(max_workers=1, thread_name_prefix="consolidation-plan") as planner,
    ):
        plans = iter_plans(conn, now, tenant=tenant, **options)

        def following() -> Plan | None:
            return next(plans, None)

        # One worker runs these in order. Queued ahead, the planner builds a lead
        # while applying is slower, and spends it when the sort of its next range
        # of tenants holds it up (see iter_plans), so applying does not wait.
        pending = deque(planner.submit(following) for _ in range(PLANS_AHEAD))
        try:
            while (planned := pending.popleft().result()) is not None:
                pending.append(planner.submit(following))
                yield planned
        finally:  # on an error or an early close, plan no further
            for queued in pending:
                queued.cancel()


@retrying()
def _apply_retrying(engine: Engine, planned: Plan, now: datetime) -> ConsolidationReport:
    with engine.begin() as conn:
        return apply(conn, planned, now, rebuild_hot=False)


def apply(
    conn: Connection, planned: Plan, now: datetime, *, rebuild_hot: bool = True
) -> ConsolidationReport:
    """Apply `planned` by id against fresh rows, in the caller's transaction; check invariants."""
    batch = str(uuid.uuid4())
    tenant = planned.tenant
    links = [
        {
            "tenant": tenant,
            "target_id": m.target_id,
            "source_id": m.source_id,
            "rule": m.rule,
            "batch": batch,
            "expected_version": m.expected_version,
            "at": now,
        }
        for m in planned.merges
    ] + [
        {
            "tenant": tenant,
            "target_id": c.summary_id,
            "source_id": i,
            "rule": "compacted",
            "batch": batch,
            "expected_version": v,
            "at": now,
        }
        for c in planned.compactions
        for i, v in c.sources
    ]
    _insert_links(conn, links)
    in_batch = memory_links.c.batch == batch
    ids = union(
        select(memory_links.c.source_id).where(in_batch),
        select(memory_links.c.target_id).where(in_batch),
    )
    touched = and_(memories.c.tenant == tenant, memories.c.id.in_(ids))
    if conn.dialect.name == "postgresql":  # hold survivors and sources until commit
        locked = conn.execute(select(memories.c.status).where(touched).with_for_update())
        before = sum(1 for status in locked.scalars() if status == Status.ACTIVE.value)
    else:
        before = _count_active(conn, touched)
    _insert_summaries(conn, planned.compactions, now, batch)
    survivor = memories.alias("survivor")
    absorbed = (
        conn.execute(
            update(memories)
            .where(
                memories.c.id == memory_links.c.source_id,
                in_batch,
                ACTIVE_ROW,
                memories.c.version == memory_links.c.expected_version,
                exists().where(
                    survivor.c.id == memory_links.c.target_id,
                    survivor.c.status == Status.ACTIVE.value,
                ),
            )
            .values(
                status=Status.SUPERSEDED.value,
                superseded_by_id=memory_links.c.target_id,
                superseded_at=now,
                version=memories.c.version + 1,
            )
        ).rowcount
        or 0
    )
    after = _count_active(conn, touched)  # same rows as `before`, plus the new summaries
    stale = ~exists().where(
        memories.c.id == memory_links.c.source_id,
        memories.c.superseded_by_id == memory_links.c.target_id,
        memories.c.status == Status.SUPERSEDED.value,
    )
    skipped = 0
    if absorbed != len(links):  # each link has its own source, so equal means none is stale
        skipped = conn.execute(delete(memory_links).where(in_batch, stale)).rowcount or 0
    _check_counts(before, after, absorbed, len(planned.compactions))
    summaries = _settle_summaries(conn, planned.compactions, batch)
    _check_successors(conn, batch)
    hot_rebuilt = hot.rebuild(conn, now, tenant=tenant) if rebuild_hot else 0
    _mark_pass(conn, tenant, "consolidate", now)
    compacted = int(
        conn.execute(
            select(func.count()).where(in_batch, memory_links.c.rule == "compacted")
        ).scalar_one()
    )
    report = ConsolidationReport(
        tenant=tenant,
        planned=planned.counts(),
        merged=int(absorbed) - compacted,
        compacted=compacted,
        summaries=summaries,
        skipped=int(skipped),
        hot_rebuilt=hot_rebuilt,
        active_before=planned.active,
        active_after=planned.active - int(absorbed) + summaries,
    )
    conn.execute(
        insert(audit).values(
            at=now,
            actor="maintenance:consolidate",
            action="consolidate",
            memory_id=None,
            tenant=tenant,
            detail=json.dumps(
                {
                    "batch": batch,
                    **{k: v for k, v in report.to_json().items() if isinstance(v, int)},
                }
            ),
        )
    )
    return report


def _insert_links(conn: Connection, links: Sequence[dict[str, Any]]) -> None:
    """All of a plan's links in one statement: on PostgreSQL an INSERT … SELECT over
    unnest()ed arrays (one round trip and one parse for a tenant's hundred thousand
    links, where a multi-row VALUES needs one per thousand); elsewhere executemany."""
    if not links:
        return
    if conn.dialect.name != "postgresql":
        conn.execute(insert(memory_links), links)
        return
    first = links[0]
    conn.execute(
        sql_text(
            "INSERT INTO ns_memory_links"
            " (tenant, target_id, source_id, rule, batch, expected_version, at)"
            " SELECT :tenant, t.target_id, t.source_id, t.rule, :batch, t.expected_version, :at"
            " FROM unnest(CAST(:targets AS text[]), CAST(:sources AS text[]),"
            " CAST(:rules AS text[]), CAST(:versions AS integer[]))"
            " AS t(target_id, source_id, rule, expected_version)"
        ).bindparams(bindparam("at", type_=Timestamp())),
        {
            "tenant": first["tenant"],
            "batch": first["batch"],
            "at": first["at"],
            "targets": [link["target_id"] for link in links],
            "sources": [link["source_id"] for link in links],
            "rules": [link["rule"] for link in links],
            "versions": [link["expected_version"] for link in links],
        },
    )


def _insert_summaries(
    conn: Connection, compactions: Iterable[Compaction], now: datetime, batch: str
) -> None:
    rows = [
        {
            "id": c.summary_id,
            "tenant": c.scope.tenant,
            "user_id": c.scope.user,
            "agent_id": c.scope.agent,
            "kind": Kind.EPISODE.value,
            "key": "",
            "content": c.content,
            "content_hash": content_hash(c.content),
            "status": Status.ACTIVE.value,
            "source": c.source.value,
            "confidence": SOURCE_CONFIDENCE[c.source],
            "reference": f"consolidation:{batch}",
            "run_id": "",
            "task_id": "",
            "agent": "",
            "subagent": "",
            "schedule": "",
            "subject": c.subject,
            "idempotency_key": f"consolidation:{c.summary_id}",
            "version": 1,
            "score": 1.0,
            "created_at": now,
            "valid_from": now,
            "valid_to": None,
            "superseded_at": None,
            "supersedes_id": None,
            "superseded_by_id": None,
            "last_reinforced_at": now,
            "last_used_at": None,
        }
        for c in compactions
    ]
    if rows:
        conn.execute(insert(memories), rows)


def _settle_summaries(conn: Connection, compactions: Sequence[Compaction], batch: str) -> int:
    """Drop summaries whose episodes all changed meanwhile; rewrite those that lost some."""
    if not compactions:
        return 0
    counts: dict[str, int] = dict(
        conn.execute(
            select(memory_links.c.target_id, func.count())
            .where(memory_links.c.batch == batch, memory_links.c.rule == "compacted")
            .group_by(memory_links.c.target_id)
        ).all()
    )
    kept = 0
    for c in compactions:
        n = counts.get(c.summary_id, 0)
        if n == 0:
            conn.execute(delete(memories).where(memories.c.id == c.summary_id))
            continue
        kept += 1
        if n < len(c.sources):
            rows = conn.execute(
                select(memories.c.created_at, memories.c.content)
                .join(memory_links, memory_links.c.source_id == memories.c.id)
                .where(memory_links.c.target_id == c.summary_id)
                .order_by(memories.c.created_at, memories.c.id)
            ).all()
            text = summary_text([(r.created_at, r.content) for r in rows])
            conn.execute(
                update(memories)
                .where(memories.c.id == c.summary_id)
                .values(content=text, content_hash=content_hash(text))
            )
    return kept


def _check_counts(before: int, after: int, absorbed: int, summaries: int) -> None:
    if after != before - absorbed + summaries:
        raise InvariantViolation(
            f"counts do not add up: {before} active before - {absorbed} absorbed"
            f" + {summaries} summaries != {after} active after"
        )


def _check_successors(conn: Connection, batch: str) -> None:
    """Every memory absorbed in this batch names a successor that is active."""
    successor = memories.alias("successor")
    orphaned = conn.execute(
        select(func.count())
        .select_from(memory_links)
        .join(successor, successor.c.id == memory_links.c.target_id)
        .where(memory_links.c.batch == batch, successor.c.status != Status.ACTIVE.value)
    ).scalar_one()
    if orphaned:
        raise InvariantViolation(
            f"{orphaned} absorbed memories would name a successor that is not active"
        )


def _count_active(conn: Connection, where: Any) -> int:
    return int(conn.execute(select(func.count()).where(where, ACTIVE_ROW)).scalar_one())


def _mark_pass(conn: Connection, tenant: str, job: str, now: datetime) -> None:
    done = conn.execute(
        update(maintenance_passes)
        .where(maintenance_passes.c.tenant == tenant, maintenance_passes.c.job == job)
        .values(last_at=now)
    ).rowcount
    if not done:
        conn.execute(insert(maintenance_passes).values(tenant=tenant, job=job, last_at=now))
