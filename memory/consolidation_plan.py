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
from itertools import chain, groupby
from operator import attrgetter, itemgetter
from typing import Any

from sqlalchemy import Connection, Engine, and_, case, func, null, select

from memory import near_duplicates
from memory.maintenance_tables import memory_links
from memory.records import SOURCE_CONFIDENCE, Kind, Scope, Source
from memory.tables import ACTIVE_ROW, memories

DEFAULT_SIMILARITY = 0.85
COMPACT_AFTER = timedelta(days=30)
MIN_EPISODES = 5
MAX_EPISODES_PER_SUMMARY = 50
SUMMARY_LINE_CHARS = 200
SUMMARY_MAX_CHARS = 4000
NEAR_DUP_KINDS = (Kind.FACT, Kind.PREFERENCE, Kind.INSTRUCTION, Kind.EPISODE)
PLAN_WORK_MEM = "128MB"
FIRST_RANGES = (0.04, 0.15, 0.4)  # share of the rows (cumulative) in the first tenant ranges


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

    Same-key races come from one small query; duplicates (same content, then near
    text) and old episodes stream in tenant order side by side, so each tenant's
    plan is ready as soon as both streams have passed it, and memory stays bounded
    by one tenant's rows. The streams read the tenants in a few ranges, the first
    ones small (`_tenant_ranges`): the database sorts a range before it sends its
    first row, so the first plan waits for the sort of a few percent of the rows,
    not of all of them, and the later sorts overlap with applying earlier plans.
    """
    live = [ACTIVE_ROW]
    if tenant is not None:
        live.append(memories.c.tenant == tenant)
    active: dict[str, int] = dict(
        conn.execute(
            select(memories.c.tenant, func.count()).where(*live).group_by(memories.c.tenant)
        ).all()
    )
    same_key: dict[str, list[Merge]] = {}
    for name, merge in _same_key(conn, live):
        same_key.setdefault(name, []).append(merge)
    keyed_losers = {m.source_id for ms in same_key.values() for m in ms}
    keyed = keyed_losers | {m.target_id for ms in same_key.values() for m in ms}
    b = _bytewise(conn)
    ranges = [
        [*live, b(memories.c.tenant) >= lo, b(memories.c.tenant) <= hi]
        for lo, hi in _tenant_ranges(active)
    ]
    # chain() opens each range's query only when the previous range is used up.
    duplicates = _ByTenant(
        chain.from_iterable(_duplicates(conn, r, similarity, keyed, keyed_losers) for r in ranges)
    )
    episodes = _ByTenant(
        chain.from_iterable(_old_episodes(conn, r, now - compact_after) for r in ranges)
    )
    for name in sorted(active):
        merges = same_key.get(name, []) + duplicates.take(name)
        taken = {i for m in merges for i in (m.source_id, m.target_id)}
        compactions = _compactions(episodes.take(name), min_episodes, taken)
        yield Plan(name, now, int(active[name]), tuple(merges), tuple(compactions)).check()


def _tenant_ranges(active: dict[str, int]) -> list[tuple[str, str]]:
    """Consecutive ranges (first, last) of the tenants in order, the first ones holding
    about FIRST_RANGES of the active rows (cumulative) and the last one the rest.

    A fixed number of ranges, so the whole-table scans stay a constant few and the
    cost stays linear in the rows; the first range small, so planning starts soon.
    """
    names = sorted(active)
    total = sum(active.values())
    bounds = [total * share for share in FIRST_RANGES]
    out: list[tuple[str, str]] = []
    start, seen = 0, 0
    for i, name in enumerate(names[:-1]):
        seen += active[name]
        if bounds and seen >= bounds[0]:
            out.append((names[start], name))
            start = i + 1
            bounds = [bound for bound in bounds if bound > seen]
    return [*out, (names[start], names[-1])] if names else []


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


def _same_key(conn: Connection, live: list[Any]) -> list[tuple[str, Merge]]:
    """Active rows that share a scope and slot (folded key): the newest wins (only a race
    makes these, so the window runs over the few keyed rows, not the table)."""
    c = memories.c
    b = _bytewise(conn)
    by_key = (
        select(
            c.id,
            c.tenant,
            c.version,
            func.first_value(c.id)
            .over(
                partition_by=(b(c.tenant), b(c.user_id), b(c.agent_id), b(c.key_folded)),
                order_by=(c.created_at.desc(), b(c.id).desc()),
            )
            .label("target"),
        )
        .where(*live, c.key != "")
        .subquery()
    )
    return [
        (r.tenant, Merge(r.id, r.target, "same-key", r.version))
        for r in conn.execute(select(by_key).where(by_key.c.id != by_key.c.target))
    ]


def _duplicates(
    conn: Connection, live: list[Any], bar: float, keyed: set[str], keyed_losers: set[str]
) -> Iterator[tuple[str, list[Merge]]]:
    """Same normalised content, then near-duplicate text, within a scope and kind.

    One sorted pass over the active rows: within a (scope, kind) group rows arrive
    in survivor order (most trusted, then oldest), so the first row with a content
    hash absorbs the later ones, and the rows left are clustered for near-duplicates
    (`near_duplicates.groups`: locality-sensitive hashing, then an exact check of
    each candidate pair: Jaccard of the word sets at least `bar`). Memory stays
    bounded by the largest group and the cost grows with the number of memories,
    not with its square. Rows in `keyed` (same-key merges) are neither absorbed by
    content nor near-duplicates, and nothing merges into a row in `keyed_losers`.
    A row with a key is never absorbed by content either: it is its slot's value (two
    keys, or two LangGraph items, holding one value are two facts), though an unkeyed
    twin may merge into it.
    Yields each tenant's merges (same-content first) as the stream passes it.
    """
    c = memories.c
    b = _bytewise(conn)
    # Text is only needed (and only sent) for the rows the near-duplicate search reads;
    # the others get NULL (content itself is never NULL).
    near_kinds = {k.value for k in NEAR_DUP_KINDS}
    text = case((and_(c.key == "", c.kind.in_(near_kinds)), c.content), else_=null())
    query = (
        select(
            c.tenant,
            c.user_id,
            c.agent_id,
            c.kind,
            c.id,
            text,
            c.version,
            c.content_hash,
            (c.key != "").label("keyed"),
        )
        .where(*live)
        .order_by(
            *map(b, (c.tenant, c.user_id, c.agent_id, c.kind)),
            c.confidence.desc(),
            c.created_at,
            b(c.id),
        )
    )
    streamed = conn.execute(query.execution_options(stream_results=True, yield_per=10_000))
    for tenant, of_tenant in groupby(streamed, key=itemgetter(0)):
        same: list[Merge] = []
        near: list[Merge] = []
        for (_, _, kind), group in groupby(of_tenant, key=itemgetter(1, 2, 3)):
            rows = list(group)
            if len(rows) < 2:
                continue
            first: dict[str, str] = {}  # content hash -> the row that absorbs its later twins
            taken: set[str] = set()
            for r in rows:
                target = first.setdefault(r[7], r[4])
                if r[8] and target != r[4]:
                    continue  # a slot's value: merging it away would empty its key
                if target != r[4] and r[4] not in keyed and target not in keyed_losers:
                    same.append(Merge(r[4], target, "same-content", r[6]))
                    taken.update((r[4], target))
            if kind in near_kinds:  # keyed rows have no text here: they are never near
                left = [r for r in rows if r[5] is not None and r[4] not in taken]
                if len(left) > 1:
                    near += _near_in_group(left, bar)
        yield tenant, same + near


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
