"""Forgetting that can be proven: delete, rebuild what carried it, re-list, report.

Only the person a memory is about and the operator may make memory forget; an
agent's request (peer or not) is refused and the refusal audited. A forget
removes the matching memories, their superseded versions, their full-text
entries (FTS5 is optimised so deleted tokens leave its segments; PostgreSQL's
table is vacuumed), pending review items (they are rows too), and rebuilds
whatever carried them: merged memories (another contributor takes over), episode
summaries (rewritten from the episodes that remain) and hot summaries. Audit
rows never held content; they are marked redacted. A tombstone keeps who, when,
why and how many, never the text or the pattern.

Afterwards every place is listed again. The report says
`scanned = skipped + deleted + failed` (checked before it is returned),
`remaining`, and `exhaustive: false` with the reason when the listing stopped
at its batch limit.

    report = forget(engine, Selector.by_subject("acme", "ana"), Requester.person("ana"),
                    reason="asked on 2026-12-01", now=now)
"""

from __future__ import annotations

import enum
import json
import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    and_,
    delete,
    func,
    insert,
    literal,
    or_,
    select,
    update,
)

from memory import hot
from memory.maintenance_tables import hot_summaries, memory_links, tombstones
from memory.records import Scope, Source, Status
from memory.tables import audit, memories, receipts

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 10_000
VERIFY_TEXTS = 200
_CHUNK = 500
COMPACTED = "compacted"


class Role(enum.StrEnum):
    PERSON = "person"
    OPERATOR = "operator"
    AGENT = "agent"
    MAINTENANCE = "maintenance"  # purge of expired rows


class SelectorKind(enum.StrEnum):
    SUBJECT = "subject"
    SCOPE = "scope"
    RUN = "run"
    SOURCE = "source"
    ID = "id"
    TEXT = "text"
    PURGE = "purge"


class ForgetRefused(PermissionError):
    """The requester may not make memory forget (agents never may)."""


class ReportArithmeticError(AssertionError):
    """scanned != skipped + deleted + failed: the report would lie, so none is returned."""


@dataclass(frozen=True, slots=True)
class Requester:
    role: Role
    name: str

    @classmethod
    def person(cls, name: str) -> Requester:
        return cls(Role.PERSON, name)

    @classmethod
    def operator(cls, name: str = "operator") -> Requester:
        return cls(Role.OPERATOR, name)

    @classmethod
    def agent(cls, name: str) -> Requester:
        return cls(Role.AGENT, name)

    @property
    def actor(self) -> str:
        return f"{self.role.value}:{self.name}"


@dataclass(frozen=True, slots=True)
class Selector:
    """What to forget, within one tenant. Build with the `by_*` constructors."""

    tenant: str
    kind: SelectorKind
    value: str = ""
    scope: Scope | None = None
    ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.tenant:
            raise ValueError("a forget needs a tenant")
        if self.kind is SelectorKind.TEXT and len(self.value.strip()) < 3:
            raise ValueError("a text match needs at least 3 characters")
        if self.kind in (SelectorKind.SUBJECT, SelectorKind.RUN) and not self.value:
            raise ValueError(f"forget by {self.kind.value} needs a value")
        if self.kind is SelectorKind.SOURCE:
            Source(self.value)  # raises ValueError naming the bad source
        if self.kind is SelectorKind.ID and not self.ids:
            raise ValueError("forget by id needs at least one id")
        if self.kind is SelectorKind.SCOPE and (
            self.scope is None or self.scope.tenant != self.tenant
        ):
            raise ValueError("forget by scope needs a scope in the same tenant")

    @classmethod
    def by_subject(cls, tenant: str, person: str) -> Selector:
        return cls(tenant, SelectorKind.SUBJECT, person)

    @classmethod
    def by_scope(cls, scope: Scope) -> Selector:
        return cls(scope.tenant, SelectorKind.SCOPE, scope=scope)

    @classmethod
    def by_run(cls, tenant: str, run_id: str) -> Selector:
        return cls(tenant, SelectorKind.RUN, run_id)

    @classmethod
    def by_source(cls, tenant: str, source: str) -> Selector:
        return cls(tenant, SelectorKind.SOURCE, source)

    @classmethod
    def by_ids(cls, tenant: str, ids: Iterable[str]) -> Selector:
        return cls(tenant, SelectorKind.ID, ids=tuple(ids))

    @classmethod
    def by_text(cls, tenant: str, text: str) -> Selector:
        return cls(tenant, SelectorKind.TEXT, text)

    def where(self) -> ColumnElement[bool]:
        c = memories.c
        match self.kind:
            case SelectorKind.SUBJECT:
                clause = or_(
                    c.subject == self.value, and_(c.subject == "", c.user_id == self.value)
                )
            case SelectorKind.SCOPE:
                assert self.scope is not None
                clause = and_(c.user_id == self.scope.user, c.agent_id == self.scope.agent)
            case SelectorKind.RUN:
                clause = or_(c.run_id == self.value, c.task_id == self.value)
            case SelectorKind.SOURCE:
                clause = c.source == self.value
            case SelectorKind.ID:
                clause = c.id.in_(self.ids)
            case SelectorKind.TEXT:
                clause = func.lower(c.content).contains(self.value.lower(), autoescape=True)
            case _:
                raise ValueError(f"selector {self.kind} has no clause")
        return and_(c.tenant == self.tenant, clause)

    def describe(self) -> dict[str, Any]:
        """For audit and tombstones: the kind, and the value unless it is text."""
        out: dict[str, Any] = {"by": self.kind.value}
        if self.kind in (SelectorKind.SUBJECT, SelectorKind.RUN, SelectorKind.SOURCE):
            out["value"] = self.value
        elif self.kind is SelectorKind.SCOPE:
            out["scope"] = str(self.scope)
        elif self.kind is SelectorKind.ID:
            out["ids"] = len(self.ids)
        return out


@dataclass(frozen=True, slots=True)
class ForgetReport:
    tombstone_id: str
    selector: dict[str, Any]
    scanned: int
    skipped: int
    deleted: int
    failed: int
    remaining: int
    exhaustive: bool
    reason: str = ""
    places: dict[str, int] = field(default_factory=dict)
    rebuilt: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def check(self) -> ForgetReport:
        if self.scanned != self.skipped + self.deleted + self.failed:
            raise ReportArithmeticError(
                f"forget report does not add up: scanned {self.scanned} != skipped {self.skipped}"
                f" + deleted {self.deleted} + failed {self.failed}"
            )
        if not self.exhaustive and not self.reason:
            raise ReportArithmeticError("a partial forget report must say why")
        return self

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["notes"] = list(self.notes)
        return out


@dataclass
class _Plan:
    listed: int
    truncated: bool
    delete: set[str]
    skipped: int


def forget(
    engine: Engine,
    selector: Selector,
    requester: Requester,
    *,
    now: datetime,
    reason: str = "",
    limit: int = DEFAULT_LIMIT,
    compact: bool = True,
) -> ForgetReport:
    """Forget what `selector` matches, for `requester`; return the verified report.

    Raises ForgetRefused (after auditing the refusal) for an agent.
    """
    if requester.role in (Role.AGENT, Role.MAINTENANCE) or not requester.name:
        _refuse(engine, selector, requester, now)
    allowed = _allowed(requester)
    return _run(
        engine,
        selector.tenant,
        selector.where(),
        allowed,
        selector.describe(),
        requester,
        now=now,
        reason=reason,
        limit=limit,
        compact=compact,
        contributors_too=selector.kind is SelectorKind.ID,
        verify_texts=VERIFY_TEXTS,
    )


def delete_where(
    engine: Engine,
    tenant: str,
    where: ColumnElement[bool],
    *,
    now: datetime,
    reason: str,
    limit: int = DEFAULT_LIMIT,
    compact: bool = True,
    verify_texts: int = 20,
) -> ForgetReport:
    """The same deletion path for maintenance (purge of expired rows), with a tombstone.

    `compact=False` leaves full-text compaction to the caller (one
    `compact_fulltext` after purging many tenants instead of one per tenant).
    """
    return _run(
        engine,
        tenant,
        and_(memories.c.tenant == tenant, where),
        literal(True),
        {"by": SelectorKind.PURGE.value},
        Requester(Role.MAINTENANCE, "purge"),
        now=now,
        reason=reason,
        limit=limit,
        compact=compact,
        contributors_too=True,  # an expired merge or summary takes what it absorbed along
        verify_texts=verify_texts,
    )


def _refuse(engine: Engine, selector: Selector, requester: Requester, now: datetime) -> None:
    with engine.begin() as conn:
        conn.execute(
            insert(audit).values(
                at=now,
                actor=requester.actor,
                action="forget.refused",
                memory_id=None,
                tenant=selector.tenant,
                detail=json.dumps({**selector.describe(), "rule": "only-person-or-operator"}),
            )
        )
    log.warning("forget refused", extra={"action": "forget.refused", "actor": requester.actor})
    raise ForgetRefused(
        f"{requester.actor} may not forget memory in tenant {selector.tenant!r}: only the person "
        "the memory is about or the operator may (the refusal is audited)"
    )


def _allowed(requester: Requester) -> ColumnElement[bool]:
    if requester.role is Role.OPERATOR:
        return literal(True)
    c = memories.c
    return or_(c.subject == requester.name, and_(c.subject == "", c.user_id == requester.name))


def _run(
    engine: Engine,
    tenant: str,
    where: ColumnElement[bool],
    allowed: ColumnElement[bool],
    described: dict[str, Any],
    requester: Requester,
    *,
    now: datetime,
    reason: str,
    limit: int,
    compact: bool,
    contributors_too: bool,
    verify_texts: int,
) -> ForgetReport:
    tombstone_id = str(uuid.uuid4())
    with engine.begin() as conn:
        if conn.dialect.name == "sqlite":
            conn.exec_driver_sql("PRAGMA secure_delete=ON")  # freed pages are zeroed
        # Episode summaries are rebuilt from what remains, not matched directly;
        # forget by id and purge (an expired summary) address them as rows.
        whole_rows = contributors_too or requester.role is Role.MAINTENANCE
        plan = _plan(conn, where, allowed, limit, contributors_too, whole_rows)
        texts = _contents(conn, plan.delete)
        deleted, rebuilt = _remove(conn, plan.delete, tenant, now)
        failed = len(plan.delete) - len(deleted)
        # A person's request is recorded even when nothing matched; an idle purge is not.
        quiet = requester.role is Role.MAINTENANCE and plan.listed == 0
        tombstone_id = "" if quiet else tombstone_id
        if not quiet:
            _record(conn, tombstone_id, tenant, requester, described, reason, len(deleted), now)
    notes = compact_fulltext(engine) if compact and deleted else ()
    if deleted and not compact:
        notes = ("full-text compaction left to the caller (compact=False)",)
    places, more_notes = _relist(engine, tenant, deleted, texts, verify_texts)
    remaining = _count(engine, and_(where, allowed)) + sum(places.values())
    exhaustive, why = not plan.truncated, ""
    if plan.truncated:
        why = f"listing stopped at the batch limit of {limit} rows; run the forget again"
    elif remaining:
        exhaustive, why = False, f"{remaining} matching rows or traces remain after the delete"
    report = ForgetReport(
        tombstone_id=tombstone_id,
        selector=described,
        scanned=plan.listed,
        skipped=plan.skipped,
        deleted=len(deleted),
        failed=failed,
        remaining=remaining,
        exhaustive=exhaustive,
        reason=why,
        places=places,
        rebuilt=rebuilt,
        notes=(*notes, *more_notes),
    ).check()
    if tombstone_id:
        with engine.begin() as conn:
            conn.execute(
                update(tombstones)
                .where(tombstones.c.id == tombstone_id)
                .values(
                    report=json.dumps(
                        {k: v for k, v in report.to_json().items() if k != "selector"}
                    )
                )
            )
    log.info(
        "forget done",
        extra={
            "action": "forget",
            "tombstone": tombstone_id,
            "deleted": report.deleted,
            "remaining": remaining,
        },
    )
    return report


def _remove(
    conn: Connection, doomed: set[str], tenant: str, now: datetime
) -> tuple[set[str], dict[str, int]]:
    """Delete `doomed` and rebuild what carried it: merges, episode summaries, hot memory."""
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


def _record(
    conn: Connection,
    tombstone_id: str,
    tenant: str,
    requester: Requester,
    described: dict[str, Any],
    reason: str,
    deleted: int,
    now: datetime,
) -> None:
    """The tombstone and the audit entry: who, when, why, how many; never the text."""
    conn.execute(
        insert(tombstones).values(
            id=tombstone_id,
            at=now,
            tenant=tenant,
            actor=requester.actor,
            role=requester.role.value,
            selector=described["by"],
            reason=reason[:500],
            deleted=deleted,
            report="{}",
        )
    )
    conn.execute(
        insert(audit).values(
            at=now,
            actor=requester.actor,
            action="forget",
            memory_id=None,
            tenant=tenant,
            detail=json.dumps({**described, "tombstone": tombstone_id, "deleted": deleted}),
        )
    )


def _plan(
    conn: Connection,
    where: ColumnElement[bool],
    allowed: ColumnElement[bool],
    limit: int,
    contributors_too: bool,
    whole_rows: bool,
) -> _Plan:
    c = memories.c
    summaries = select(memory_links.c.target_id).where(memory_links.c.rule == COMPACTED)
    matched = where if whole_rows else and_(where, c.id.not_in(summaries))
    query = select(c.id, allowed.label("allowed")).where(matched).order_by(c.id).limit(limit + 1)
    rows = conn.execute(query).all()
    truncated = len(rows) > limit
    rows = rows[:limit]
    keep = {r.id for r in rows if r.allowed}
    extra = _expand(conn, keep, allowed, contributors_too)
    listed = len(rows) + len(extra["all"])
    delete_ids = keep | extra["allowed"]
    return _Plan(listed, truncated, delete_ids, listed - len(delete_ids))


def _expand(
    conn: Connection, start: set[str], allowed: ColumnElement[bool], contributors_too: bool
) -> dict[str, set[str]]:
    """Superseded versions (and, for forget by id, merged contributors), level by level."""
    seen, found, ok = set(start), set(), set()
    frontier = set(start)
    linked_sources = select(memory_links.c.source_id)
    while frontier:
        nxt: set[str] = set()
        for chunk in _chunks(frontier):
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


def _contents(conn: Connection, ids: set[str]) -> set[str]:
    out: set[str] = set()
    for chunk in _chunks(ids):
        out.update(
            conn.execute(select(memories.c.content).where(memories.c.id.in_(chunk))).scalars()
        )
    return out


def _scopes_of(conn: Connection, ids: set[str]) -> set[Scope]:
    out: set[Scope] = set()
    for chunk in _chunks(ids):
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
    for chunk in _chunks(doomed):
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
    for chunk in _chunks(ids):
        query = select(memory_links.c.target_id).where(
            memory_links.c.rule == COMPACTED, memory_links.c.source_id.in_(chunk)
        )
        out.update(conn.execute(query).scalars())
    return out - ids


def _delete_rows(conn: Connection, ids: set[str]) -> set[str]:
    out: set[str] = set()
    for chunk in _chunks(ids):
        result = conn.execute(
            delete(memories).where(memories.c.id.in_(chunk)).returning(memories.c.id)
        )
        out.update(result.scalars())
    return out


def _drop_links(conn: Connection, ids: set[str]) -> None:
    for chunk in _chunks(ids):
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
    for chunk in _chunks(ids):
        conn.execute(update(audit).where(audit.c.memory_id.in_(chunk)).values(redacted=True))


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


def _relist(
    engine: Engine, tenant: str, deleted: set[str], texts: set[str], verify_texts: int
) -> tuple[dict[str, int], tuple[str, ...]]:
    """Look for what was deleted in every place it could have been."""
    places = dict.fromkeys(("memories", "fulltext", "links", "hot", "audit", "receipts"), 0)
    notes: list[str] = []
    with engine.connect() as conn:
        for chunk in _chunks(deleted):
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
                .where(audit.c.memory_id.in_(chunk), audit.c.redacted.is_(False)),
            )
            if conn.dialect.name == "sqlite":
                marks = ",".join("?" * len(chunk))
                places["fulltext"] += conn.exec_driver_sql(
                    f"SELECT count(*) FROM ns_memories_fts WHERE memory_id IN ({marks})",
                    tuple(chunk),
                ).scalar_one()
        places["hot"] += len(hot.scopes_built_from(conn, tenant, deleted))
        gone = [t for t in texts if not _still_held(conn, tenant, t)]
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
            if conn.dialect.name == "sqlite":
                places["fulltext"] += conn.exec_driver_sql(
                    "SELECT count(*) FROM ns_memories_fts WHERE instr(lower(content), lower(?)) > 0",
                    (text,),
                ).scalar_one()
    return places, tuple(notes)


def _still_held(conn: Connection, tenant: str, text: str) -> bool:
    """Another memory, not forgotten, holds the same text (e.g. another person's)."""
    query = select(memories.c.id).where(memories.c.tenant == tenant, memories.c.content == text)
    return conn.execute(query.limit(1)).first() is not None


def _contains(conn: Connection, column: Any, text: str, where: ColumnElement[bool]) -> int:
    query = select(func.count()).where(
        where, func.lower(column).contains(text.lower(), autoescape=True)
    )
    return _scalar(conn, query)


def _count(engine: Engine, where: ColumnElement[bool]) -> int:
    with engine.connect() as conn:
        return _scalar(conn, select(func.count()).where(where))


def _scalar(conn: Connection, query: Any) -> int:
    return int(conn.execute(query).scalar_one())


def _chunks(ids: Iterable[str]) -> Iterable[list[str]]:
    items: Sequence[str] = sorted(ids)
    for start in range(0, len(items), _CHUNK):
        yield list(items[start : start + _CHUNK])


__all__ = [
    "ForgetRefused",
    "ForgetReport",
    "Requester",
    "Role",
    "Selector",
    "compact_fulltext",
    "delete_where",
    "forget",
]
