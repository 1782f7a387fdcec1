"""Consolidation: merge duplicates, supersede replaced facts, compact old episodes,
rebuild hot summaries — without ever losing a write that lands meanwhile.

Two steps, so the slow part holds no locks:

1. `plan` reads one consistent snapshot of a tenant (REPEATABLE READ on
   PostgreSQL) and decides, by id: which memory absorbs which (same key → the
   newest wins; same content up to case and white space, or near-duplicate text
   above `similarity` → the most trusted, oldest wins), and which old episodes
   fold into a summary. Each decision records the version it saw.
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

import functools
import hashlib
import json
import re
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from itertools import chain
from typing import Any

from sqlalchemy import Connection, Engine, and_, delete, exists, func, insert, select, union, update

from memory import hot
from memory.engine import retrying
from memory.maintenance_tables import maintenance_passes, memory_links
from memory.records import SOURCE_CONFIDENCE, Kind, Scope, Source, Status, content_hash
from memory.tables import audit, memories

DEFAULT_SIMILARITY = 0.85
COMPACT_AFTER = timedelta(days=30)
MIN_EPISODES = 5
MAX_EPISODES_PER_SUMMARY = 50
SUMMARY_LINE_CHARS = 200
SUMMARY_MAX_CHARS = 4000
_SEEDS = (0x5BD1E995, 0x27D4EB2F, 0x165667B1)  # one XOR permutation of word hashes per band
NEAR_DUP_KINDS = (Kind.FACT, Kind.PREFERENCE, Kind.INSTRUCTION, Kind.EPISODE)
_WORD = re.compile(r"\w+")


class InvariantViolation(RuntimeError):
    """Applying the plan would lose an active memory or break the counts; nothing was written."""


@dataclass(frozen=True, slots=True)
class Merge:
    source_id: str  # absorbed: becomes superseded, names target_id
    target_id: str  # survivor
    rule: str  # same-key | same-content | near-duplicate
    expected_version: int


@dataclass(frozen=True, slots=True)
class Compaction:
    summary_id: str
    scope: Scope
    sources: tuple[tuple[str, int], ...]  # (id, version seen)
    content: str
    source: Source
    subject: str


@dataclass(frozen=True, slots=True)
class Plan:
    tenant: str
    planned_at: datetime
    active: int  # active memories in the snapshot
    merges: tuple[Merge, ...] = ()
    compactions: tuple[Compaction, ...] = ()

    def counts(self) -> dict[str, int]:
        by_rule: dict[str, int] = {}
        for m in self.merges:
            by_rule[m.rule] = by_rule.get(m.rule, 0) + 1
        return {
            "active": self.active,
            **by_rule,
            "compactions": len(self.compactions),
            "episodes_compacted": sum(len(c.sources) for c in self.compactions),
        }

    def check(self) -> Plan:
        """No memory absorbed twice, and no survivor that is itself absorbed."""
        sources = [m.source_id for m in self.merges]
        sources += [i for c in self.compactions for i, _ in c.sources]
        if len(sources) != len(set(sources)):
            raise InvariantViolation("plan absorbs a memory twice")
        targets = {m.target_id for m in self.merges}
        if targets & set(sources):
            raise InvariantViolation("plan merges into a memory it also absorbs")
        return self

    def to_json(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "planned_at": self.planned_at.isoformat(),
            "counts": self.counts(),
            "merges": [asdict(m) for m in self.merges],
            "compactions": [
                {
                    "summary_id": c.summary_id,
                    "scope": str(c.scope),
                    "sources": [i for i, _ in c.sources],
                }
                for c in self.compactions
            ],
        }


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


def summary_text(items: Sequence[tuple[datetime, str]]) -> str:
    """The text of an episode summary: one dated line per episode, bounded."""
    first, last = items[0][0], items[-1][0]
    lines = [f"Summary of {len(items)} episodes, {first:%Y-%m-%d} to {last:%Y-%m-%d}:"]
    used = len(lines[0])
    for at, content in items:
        text = " ".join(content.split())
        line = f"- {at:%Y-%m-%d}: {text[:SUMMARY_LINE_CHARS]}"
        if used + len(line) + 1 > SUMMARY_MAX_CHARS:
            lines.append(f"- … {len(items) - len(lines) + 1} more")
            break
        lines.append(line)
        used += len(line) + 1
    return "\n".join(lines)


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

    Planning reads the table once, in scope order, however many tenants there
    are; each tenant's plan is then applied in its own transaction, retried whole
    on a deadlock or serialization failure (applying by id against fresh rows is
    safe at any time, so the plan is not re-made). Hot summaries are rebuilt
    once at the end, in one statement. Returns each tenant's plan and report
    (None on a dry run) and how many hot summaries exist afterwards.
    """
    with snapshot(engine) as conn:
        plans = plan_all(conn, now, tenant=tenant, **options)
    out: list[tuple[Plan, ConsolidationReport | None]] = []
    for planned in plans:
        report = None if dry_run else _apply_retrying(engine, planned, now)
        out.append((planned, report))
        progress(planned.tenant)
    hot_summaries = 0
    if not dry_run and plans:
        with engine.begin() as conn:
            hot_summaries = hot.rebuild(conn, now, tenant=tenant)
    return out, hot_summaries


@retrying()
def _apply_retrying(engine: Engine, planned: Plan, now: datetime) -> ConsolidationReport:
    with engine.begin() as conn:
        return apply(conn, planned, now, rebuild_hot=False)


@contextmanager
def snapshot(engine: Engine) -> Iterator[Connection]:
    """One consistent read: REPEATABLE READ on PostgreSQL; SQLite's transaction already is."""
    if engine.dialect.name == "postgresql":
        with (
            engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn,
            conn.begin(),
        ):
            yield conn
        return
    with engine.begin() as conn:
        yield conn


def plan(conn: Connection, tenant: str, now: datetime, **options: Any) -> Plan:
    """The plan for one tenant (run it in one transaction for a consistent read)."""
    found = plan_all(conn, now, tenant=tenant, **options)
    return found[0] if found else Plan(tenant, now, 0)


def plan_all(
    conn: Connection,
    now: datetime,
    *,
    tenant: str | None = None,
    similarity: float = DEFAULT_SIMILARITY,
    compact_after: timedelta = COMPACT_AFTER,
    min_episodes: int = MIN_EPISODES,
) -> list[Plan]:
    """Decide what to merge and compact, per tenant, in a few whole-table passes."""
    live = [memories.c.status == Status.ACTIVE.value]
    if tenant is not None:
        live.append(memories.c.tenant == tenant)
    active: dict[str, int] = dict(
        conn.execute(
            select(memories.c.tenant, func.count()).where(*live).group_by(memories.c.tenant)
        ).all()
    )
    merges = _exact_duplicates(conn, live)
    taken = {m.source_id for _, m in merges} | {m.target_id for _, m in merges}
    near = _near_duplicates(conn, live, similarity, taken)
    taken |= {m.source_id for _, m in near} | {m.target_id for _, m in near}
    compactions = _compactions(conn, live, now - compact_after, min_episodes, taken)
    by_tenant: dict[str, tuple[list[Merge], list[Compaction]]] = {t: ([], []) for t in active}
    for name, merge in (*merges, *near):
        by_tenant[name][0].append(merge)
    for compaction in compactions:
        by_tenant[compaction.scope.tenant][1].append(compaction)
    return [
        Plan(name, now, int(active[name]), tuple(m), tuple(c)).check()
        for name, (m, c) in sorted(by_tenant.items())
    ]


def _exact_duplicates(conn: Connection, live: list[Any]) -> list[tuple[str, Merge]]:
    """Same key (newest wins) and same normalised content (most trusted, then oldest, wins)."""
    c = memories.c
    scope = (c.tenant, c.user_id, c.agent_id)
    by_key = (
        select(
            c.id,
            c.tenant,
            c.version,
            func.first_value(c.id)
            .over(partition_by=(*scope, c.key), order_by=(c.created_at.desc(), c.id.desc()))
            .label("target"),
        )
        .where(*live, c.key != "")
        .subquery()
    )
    out = [
        (r.tenant, Merge(r.id, r.target, "same-key", r.version))
        for r in conn.execute(select(by_key).where(by_key.c.id != by_key.c.target))
    ]
    keyed_losers = {m.source_id for _, m in out}
    keyed = keyed_losers | {m.target_id for _, m in out}
    by_content = (
        select(
            c.id,
            c.tenant,
            c.version,
            func.first_value(c.id)
            .over(
                partition_by=(*scope, c.kind, c.content_hash),
                order_by=(c.confidence.desc(), c.created_at, c.id),
            )
            .label("target"),
        )
        .where(*live)
        .subquery()
    )
    for r in conn.execute(select(by_content).where(by_content.c.id != by_content.c.target)):
        if r.id in keyed or r.target in keyed_losers:
            continue
        out.append((r.tenant, Merge(r.id, r.target, "same-content", r.version)))
    return out


def _near_duplicates(
    conn: Connection, live: list[Any], bar: float, taken: set[str]
) -> list[tuple[str, Merge]]:
    """Texts whose word sets overlap by at least `bar` (Jaccard), within a scope and kind.

    Rows stream in scope order and each (scope, kind) group is clustered on its
    own, so memory stays bounded by the largest group. Candidates are found by
    locality-sensitive hashing (`_sketch`), so the cost grows with the number of
    memories, not with its square; each candidate pair is then checked exactly.
    """
    c = memories.c
    query = (
        select(
            c.id,
            c.tenant,
            c.user_id,
            c.agent_id,
            c.kind,
            c.content,
            c.confidence,
            c.created_at,
            c.version,
        )
        .where(*live, c.key == "", c.kind.in_([k.value for k in NEAR_DUP_KINDS]))
        .order_by(c.tenant, c.user_id, c.agent_id, c.kind)
    )
    out: list[tuple[str, Merge]] = []
    group: list[Any] = []
    streamed = conn.execute(query.execution_options(stream_results=True, yield_per=10_000))
    for r in chain(streamed, [None]):
        if group and (
            r is None or (r.tenant, r.user_id, r.agent_id, r.kind) != _group_key(group[0])
        ):
            out += _near_in_group(group, bar)
            group = []
        if r is not None and r.id not in taken:
            group.append(r)
    return out


def _group_key(r: Any) -> tuple[str, str, str, str]:
    return (r.tenant, r.user_id, r.agent_id, r.kind)


def _near_in_group(rows: list[Any], bar: float) -> list[tuple[str, Merge]]:
    texts = [frozenset(_WORD.findall(r.content.lower())) for r in rows]
    buckets: dict[tuple[int, ...], list[int]] = {}
    for i, words in enumerate(texts):
        for key in _sketch(words):
            buckets.setdefault(key, []).append(i)
    out: list[tuple[str, Merge]] = []
    for members in _clusters(texts, buckets.values(), bar):
        best = min(members, key=lambda i: (-rows[i].confidence, rows[i].created_at, rows[i].id))
        out += [
            (rows[i].tenant, Merge(rows[i].id, rows[best].id, "near-duplicate", rows[i].version))
            for i in members
            if i != best
        ]
    return out


def _sketch(words: frozenset[str]) -> list[tuple[int, ...]]:
    """LSH keys: per band, the two smallest hashes of the words under that band's seed.

    Two texts share a band's key when their two minimum words agree, which for
    Jaccard 0.85 happens in most of the 3 bands and for unrelated texts almost never,
    so candidate buckets stay small however common a word is.
    """
    hashes = [_word_hash(w) for w in words]
    if len(hashes) < 2:
        return [(0, *hashes)]
    return [(seed, *sorted(_mix(h, seed) for h in hashes)[:2]) for seed in _SEEDS]


@functools.lru_cache(maxsize=1 << 16)
def _word_hash(word: str) -> int:
    """A hash that is the same in every process (Python's `hash` of a str is salted
    per process, which made the same plan differ from run to run)."""
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")


def _mix(value: int, seed: int) -> int:
    """A cheap, well-spread 64-bit permutation per seed (multiply, then xor-shift)."""
    x = ((value ^ seed) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def _clusters(
    texts: Sequence[frozenset[str]], buckets: Iterable[list[int]], bar: float
) -> list[list[int]]:
    """Union-find over candidate pairs whose Jaccard similarity reaches `bar`."""
    parent = list(range(len(texts)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for members in buckets:
        if not 2 <= len(members) <= 200:  # a word shared by hundreds of texts is no signal
            continue
        for pos, a in enumerate(members):
            for b in members[pos + 1 :]:
                if root(a) != root(b) and _jaccard(texts[a], texts[b]) >= bar:
                    parent[root(a)] = root(b)
    groups: dict[int, list[int]] = {}
    for i in range(len(texts)):
        groups.setdefault(root(i), []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 1.0 if a == b else 0.0
    small, large = sorted((len(a), len(b)))
    if small < large * 0.5:  # cannot reach any useful bar
        return small / large
    return len(a & b) / len(a | b)


def _compactions(
    conn: Connection, live: list[Any], before: datetime, min_episodes: int, taken: set[str]
) -> list[Compaction]:
    c = memories.c
    summaries = select(memory_links.c.target_id).where(memory_links.c.rule == "compacted")
    query = (
        select(
            c.id,
            c.tenant,
            c.user_id,
            c.agent_id,
            c.content,
            c.created_at,
            c.version,
            c.source,
            c.subject,
        )
        .where(*live, c.kind == Kind.EPISODE.value, c.created_at < before, c.id.not_in(summaries))
        .order_by(c.tenant, c.user_id, c.agent_id, c.created_at, c.id)
    )
    groups: dict[Scope, list[Any]] = {}
    for r in conn.execute(query.execution_options(stream_results=True, yield_per=10_000)):
        if r.id not in taken:
            groups.setdefault(Scope(r.tenant, r.user_id, r.agent_id), []).append(r)
    out: list[Compaction] = []
    for scope, rows in groups.items():
        for start in range(0, len(rows), MAX_EPISODES_PER_SUMMARY):
            part = rows[start : start + MAX_EPISODES_PER_SUMMARY]
            if len(part) >= min_episodes:
                out.append(_compaction(scope, part))
    return out


def _compaction(scope: Scope, part: list[Any]) -> Compaction:
    sources = {Source(r.source) for r in part}
    subjects = {r.subject for r in part}
    return Compaction(
        summary_id=str(uuid.uuid4()),
        scope=scope,
        sources=tuple((r.id, r.version) for r in part),
        content=summary_text([(r.created_at, r.content) for r in part]),
        source=min(sources, key=lambda s: SOURCE_CONFIDENCE[s]),
        subject=subjects.pop() if len(subjects) == 1 else "",
    )


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
    if links:
        conn.execute(insert(memory_links), links)
    in_batch = memory_links.c.batch == batch
    ids = union(
        select(memory_links.c.source_id).where(in_batch),
        select(memory_links.c.target_id).where(in_batch),
    )
    touched = and_(memories.c.tenant == tenant, memories.c.id.in_(ids))
    if conn.dialect.name == "postgresql":  # hold survivors and sources until commit
        conn.execute(select(memories.c.id).where(touched).with_for_update())
    before = _count_active(conn, touched)
    _insert_summaries(conn, planned.compactions, now, batch)
    survivor = memories.alias("survivor")
    absorbed = (
        conn.execute(
            update(memories)
            .where(
                memories.c.id == memory_links.c.source_id,
                in_batch,
                memories.c.status == Status.ACTIVE.value,
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
    return int(
        conn.execute(
            select(func.count()).where(where, memories.c.status == Status.ACTIVE.value)
        ).scalar_one()
    )


def _mark_pass(conn: Connection, tenant: str, job: str, now: datetime) -> None:
    done = conn.execute(
        update(maintenance_passes)
        .where(maintenance_passes.c.tenant == tenant, maintenance_passes.c.job == job)
        .values(last_at=now)
    ).rowcount
    if not done:
        conn.execute(insert(maintenance_passes).values(tenant=tenant, job=job, last_at=now))
