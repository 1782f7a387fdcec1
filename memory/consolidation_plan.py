"""Consolidation planning: what to merge and what to compact, decided by id.

`iter_plans` reads one consistent snapshot (REPEATABLE READ on PostgreSQL) and,
tenant by tenant, decides which memory absorbs which (same key → the newest wins;
same content up to case and white space, or near-duplicate text above
`similarity` → the most trusted, oldest wins) and which old episodes fold into a
summary. Each decision records the version it saw, so `consolidation.apply` can
skip anything that changed since. Planning writes nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from itertools import groupby
from operator import attrgetter, itemgetter
from typing import Any

from sqlalchemy import Connection, Engine, func, select

from memory import near_duplicates
from memory.maintenance_tables import memory_links
from memory.records import SOURCE_CONFIDENCE, Kind, Scope, Source, Status
from memory.tables import memories

DEFAULT_SIMILARITY = 0.85
COMPACT_AFTER = timedelta(days=30)
MIN_EPISODES = 5
MAX_EPISODES_PER_SUMMARY = 50
SUMMARY_LINE_CHARS = 200
SUMMARY_MAX_CHARS = 4000
NEAR_DUP_KINDS = (Kind.FACT, Kind.PREFERENCE, Kind.INSTRUCTION, Kind.EPISODE)
PLAN_WORK_MEM = "128MB"


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


@contextmanager
def snapshot(engine: Engine) -> Iterator[Connection]:
    """One consistent read: REPEATABLE READ on PostgreSQL; SQLite's transaction already is."""
    if engine.dialect.name == "postgresql":
        with (
            engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn,
            conn.begin(),
        ):
            # Planning sorts every active row of a tenant set a few times; let those
            # sorts run in memory rather than spill (this transaction only).
            conn.exec_driver_sql(f"SET LOCAL work_mem = '{PLAN_WORK_MEM}'")
            yield conn
        return
    with engine.begin() as conn:
        yield conn


def plan(conn: Connection, tenant: str, now: datetime, **options: Any) -> Plan:
    """The plan for one tenant (run it in one transaction for a consistent read)."""
    found = plan_all(conn, now, tenant=tenant, **options)
    return found[0] if found else Plan(tenant, now, 0)


def plan_all(conn: Connection, now: datetime, **options: Any) -> list[Plan]:
    """Every tenant's plan (or one tenant's, with `tenant=`), in tenant order."""
    return list(iter_plans(conn, now, **options))


def iter_plans(
    conn: Connection,
    now: datetime,
    *,
    tenant: str | None = None,
    similarity: float = DEFAULT_SIMILARITY,
    compact_after: timedelta = COMPACT_AFTER,
    min_episodes: int = MIN_EPISODES,
) -> Iterator[Plan]:
    """Decide what to merge and compact, tenant by tenant, in a few whole-table passes.

    Exact duplicates come from one query; near-duplicates and old episodes stream
    in tenant order side by side, so each tenant's plan is ready as soon as both
    streams have passed it, and memory stays bounded by one tenant's rows.
    """
    live = [memories.c.status == Status.ACTIVE.value]
    if tenant is not None:
        live.append(memories.c.tenant == tenant)
    active: dict[str, int] = dict(
        conn.execute(
            select(memories.c.tenant, func.count()).where(*live).group_by(memories.c.tenant)
        ).all()
    )
    exact: dict[str, list[Merge]] = {}
    for name, merge in _exact_duplicates(conn, live):
        exact.setdefault(name, []).append(merge)
    exact_taken = {i for ms in exact.values() for m in ms for i in (m.source_id, m.target_id)}
    near = _ByTenant(_near_duplicates(conn, live, similarity, exact_taken))
    episodes = _ByTenant(_old_episodes(conn, live, now - compact_after))
    for name in sorted(active):
        merges = exact.get(name, []) + near.take(name)
        taken = {i for m in merges for i in (m.source_id, m.target_id)}
        compactions = _compactions(episodes.take(name), min_episodes, taken)
        yield Plan(name, now, int(active[name]), tuple(merges), tuple(compactions)).check()


class _ByTenant:
    """A stream of `(tenant, items)` in tenant order, read one tenant at a time."""

    def __init__(self, stream: Iterator[tuple[str, list[Any]]]) -> None:
        self._stream = stream
        self._head = next(stream, None)

    def take(self, tenant: str) -> list[Any]:
        head = self._head
        if head is None or head[0] > tenant:
            return []
        if head[0] < tenant:  # the streams and the tenant list disagree on order
            raise InvariantViolation(f"plan streams out of order at tenant {head[0]!r}")
        self._head = next(self._stream, None)
        return head[1]


def _exact_duplicates(conn: Connection, live: list[Any]) -> list[tuple[str, Merge]]:
    """Same key (newest wins) and same normalised content (most trusted, then oldest, wins)."""
    c = memories.c
    b = _bytewise(conn)
    scope = (b(c.tenant), b(c.user_id), b(c.agent_id))
    by_key = (
        select(
            c.id,
            c.tenant,
            c.version,
            func.first_value(c.id)
            .over(partition_by=(*scope, b(c.key)), order_by=(c.created_at.desc(), b(c.id).desc()))
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
                partition_by=(*scope, b(c.kind), b(c.content_hash)),
                order_by=(c.confidence.desc(), c.created_at, b(c.id)),
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
) -> Iterator[tuple[str, list[Merge]]]:
    """Texts whose word sets overlap by at least `bar` (Jaccard), within a scope and kind.

    Rows stream in scope order and each (scope, kind) group is clustered on its
    own (`near_duplicates.groups`: locality-sensitive hashing, then an exact check
    of each candidate pair), so memory stays bounded by the largest group and the
    cost grows with the number of memories, not with its square. Yields each
    tenant's merges as the stream passes it.
    """
    c = memories.c
    b = _bytewise(conn)
    # Within a group, rows arrive in survivor order (most trusted, then oldest), so
    # the database's one sort both groups and ranks them and no timestamps are sent.
    query = (
        select(c.tenant, c.user_id, c.agent_id, c.kind, c.id, c.content, c.version)
        .where(*live, c.key == "", c.kind.in_([k.value for k in NEAR_DUP_KINDS]))
        .order_by(
            *map(b, (c.tenant, c.user_id, c.agent_id, c.kind)),
            c.confidence.desc(),
            c.created_at,
            b(c.id),
        )
    )
    streamed = conn.execute(query.execution_options(stream_results=True, yield_per=10_000))
    for tenant, of_tenant in groupby(streamed, key=itemgetter(0)):
        out: list[Merge] = []
        for _, group in groupby(of_tenant, key=itemgetter(1, 2, 3)):
            rows = [r for r in group if r[4] not in taken]
            if len(rows) > 1:
                out += _near_in_group(rows, bar)
        yield tenant, out


def _bytewise(conn: Connection) -> Callable[[Any], Any]:
    """Compare strings byte by byte when grouping and ordering: the plan needs equal
    scopes together and a fixed order, not a language's collation, and on PostgreSQL
    a locale-aware sort of a million rows costs about twice as much. SQLite's default
    comparison already is bytewise."""
    if conn.dialect.name == "postgresql":
        return lambda column: column.collate("C")
    return lambda column: column


def _near_in_group(rows: list[Any], bar: float) -> list[Merge]:
    """`rows` are (tenant, user, agent, kind, id, content, version), the best first."""
    out: list[Merge] = []
    for members in near_duplicates.groups([r[5] for r in rows], bar):
        best = rows[members[0]][4]  # rows arrive best first; members ascend
        out += [Merge(rows[i][4], best, "near-duplicate", rows[i][6]) for i in members[1:]]
    return out


def _old_episodes(
    conn: Connection, live: list[Any], before: datetime
) -> Iterator[tuple[str, list[Any]]]:
    """Episodes older than `before` that are not summaries themselves, per tenant."""
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
        .order_by(*map(_bytewise(conn), (c.tenant, c.user_id, c.agent_id)), c.created_at, c.id)
    )
    streamed = conn.execute(query.execution_options(stream_results=True, yield_per=10_000))
    for tenant, rows in groupby(streamed, key=attrgetter("tenant")):
        yield tenant, list(rows)


def _compactions(rows: list[Any], min_episodes: int, taken: set[str]) -> list[Compaction]:
    """Each scope's old episodes, oldest first, folded MAX_EPISODES_PER_SUMMARY at a time."""
    groups: dict[Scope, list[Any]] = {}
    for r in rows:
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
