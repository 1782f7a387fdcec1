"""Named queries over the memory tables. Every read takes the scopes its caller may
read and filters by them inside the SQL, so isolation never depends on the caller.
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    and_,
    bindparam,
    case,
    false,
    func,
    insert,
    literal,
    literal_column,
    or_,
    select,
    update,
)

from memory import fulltext, lookups
from memory.dialect import DriverStatement, one_of
from memory.expiry import (
    DEFAULT_TTL,
    TtlConfig,
    cutoff_param,
    cutoff_values,
    literal_cutoff,
    within_ttl,
)
from memory.loading import Ranked
from memory.port import AuditEntry
from memory.receipts import Decision, WriteReceipt
from memory.records import Kind, Memory, Scope, Status, content_hash
from memory.tables import Timestamp, audit, memories, receipts

ScopeOrScopes = Scope | Sequence[Scope]
ROW = tuple(c for c in memories.c if c.name != "search_vector")
"""The columns a `Memory` is built from (the search vector stays in the database)."""


def in_scope(scope: Scope) -> ColumnElement[bool]:
    """Rows of exactly this scope."""
    return and_(
        memories.c.tenant == scope.tenant,
        memories.c.user_id == scope.user,
        memories.c.agent_id == scope.agent,
    )


def readable_among(scopes: Sequence[Scope]) -> ColumnElement[bool]:
    """Rows of exactly these scopes; none at all when `scopes` is empty."""
    if not scopes:
        return false()
    return or_(*(in_scope(s) for s in scopes))


def readable_by(scope: ScopeOrScopes) -> ColumnElement[bool]:
    """Rows of this scope and the layers above it (or of an explicit list of scopes)."""
    return readable_among(scope.readable() if isinstance(scope, Scope) else scope)


def loadable(now: datetime, min_score: float, ttl: TtlConfig = DEFAULT_TTL) -> ColumnElement[bool]:
    """Active, not past valid_to, not past its TTL, not voted below the bar."""
    return and_(
        memories.c.status == Status.ACTIVE.value,
        or_(memories.c.valid_to.is_(None), memories.c.valid_to > now),
        within_ttl(ttl, literal_cutoff(now)),
        memories.c.score >= min_score,
    )


def to_values(memory: Memory) -> dict[str, Any]:
    """A Memory as column values for ns_memories."""
    values: dict[str, Any] = {}
    for name in memory.__dataclass_fields__:
        if name == "scope":
            continue
        values[name] = _db(getattr(memory, name))
    values.update(
        tenant=memory.scope.tenant,
        user_id=memory.scope.user,
        agent_id=memory.scope.agent,
        content_hash=content_hash(memory.content),
    )
    return values


def _db(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def by_idempotency_key(conn: Connection, scope: Scope, key: str) -> Memory | None:
    query = select(*ROW).where(in_scope(scope), memories.c.idempotency_key == key)
    row = conn.execute(query).mappings().first()
    return Memory.from_row(row) if row else None


def active_by_key(conn: Connection, scope: Scope, key: str) -> Memory | None:
    query = select(*ROW).where(
        in_scope(scope), memories.c.key == key, memories.c.status == Status.ACTIVE.value
    )
    row = conn.execute(query).mappings().first()
    return Memory.from_row(row) if row else None


def insert_memory(conn: Connection, memory: Memory) -> None:
    conn.execute(insert(memories).values(to_values(memory)))


def insert_memories(conn: Connection, batch: Sequence[Memory]) -> None:
    """Insert many rows in one statement (SQLAlchemy's insertmanyvalues)."""
    if batch:
        conn.execute(insert(memories), [to_values(m) for m in batch])


def _scope_key_in(column: Any, pairs: Sequence[tuple[Scope, str]]) -> ColumnElement[bool]:
    """Rows whose (scope, column) is one of `pairs`: one `IN` per scope, so each arm is
    a range on the (tenant, user_id, agent_id, …) index rather than a filter."""
    grouped: dict[Scope, list[str]] = {}
    for scope, key in pairs:
        grouped.setdefault(scope, []).append(key)
    return or_(*(and_(in_scope(s), column.in_(sorted(set(k)))) for s, k in grouped.items()))


def supersede_many(conn: Connection, successors: Mapping[str, str], now: datetime) -> None:
    """Mark each `old id → new id` superseded, in one statement."""
    if not successors:
        return
    conn.execute(
        update(memories)
        .where(memories.c.id.in_(list(successors)))
        .values(
            status=Status.SUPERSEDED.value,
            superseded_at=now,
            valid_to=now,
            superseded_by_id=case(successors, value=memories.c.id),
            version=memories.c.version + 1,
        )
    )


def existing(
    conn: Connection,
    idempotency: Sequence[tuple[Scope, str]],
    slots: Sequence[tuple[Scope, str]],
) -> tuple[dict[tuple[Scope, str], Memory], dict[tuple[Scope, str], Memory]]:
    """What an apply needs to know up front, in one query: the rows already holding
    these idempotency keys, and the active row of each of these slots."""
    if conn.dialect.name == "postgresql":
        return lookups.existing(conn, idempotency, slots)
    arms = []
    if idempotency:
        arms.append(_scope_key_in(memories.c.idempotency_key, idempotency))
    if slots:
        arms.append(
            and_(_scope_key_in(memories.c.key, slots), memories.c.status == Status.ACTIVE.value)
        )
    if not arms:
        return {}, {}
    found = [Memory.from_row(r) for r in conn.execute(select(*ROW).where(or_(*arms))).mappings()]
    wanted_idem, wanted_slots = set(idempotency), set(slots)
    by_idem = {
        (m.scope, m.idempotency_key): m
        for m in found
        if (m.scope, m.idempotency_key) in wanted_idem
    }
    active = {
        (m.scope, m.key): m
        for m in found
        if m.status is Status.ACTIVE and (m.scope, m.key) in wanted_slots
    }
    return by_idem, active


def update_memory(
    conn: Connection,
    memory_id: str,
    changes: Mapping[str, Any],
    *,
    expected_version: int | None = None,
) -> bool:
    """Set `changes` (Memory field names); False when the row moved past `expected_version`."""
    values = {k: _db(v) for k, v in changes.items()}
    if "content" in values:
        values["content_hash"] = content_hash(values["content"])
    statement = update(memories).where(memories.c.id == memory_id).values(values)
    if expected_version is not None:
        statement = statement.where(memories.c.version == expected_version)
    return conn.execute(statement).rowcount == 1


def record_audit(conn: Connection, entries: Iterable[AuditEntry]) -> None:
    values = [
        {
            "at": e.at,
            "actor": e.actor,
            "tenant": e.tenant,
            "action": e.action,
            "memory_id": e.memory_id,
            "detail": json.dumps(e.detail),
        }
        for e in entries
    ]
    if values:
        conn.execute(insert(audit), values)


def audit_trail(conn: Connection, tenant: str, memory_id: str, limit: int) -> list[AuditEntry]:
    query = select(audit).where(audit.c.tenant == tenant)
    if memory_id:
        query = query.where(audit.c.memory_id == memory_id)
    query = query.order_by(audit.c.id).limit(limit)
    return [
        AuditEntry(
            at=r["at"],
            actor=r["actor"],
            action=r["action"],
            memory_id=r["memory_id"],
            tenant=r["tenant"],
            detail=json.loads(r["detail"] or "{}"),
        )
        for r in conn.execute(query).mappings()
    ]


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
    if conn.dialect.name == "postgresql":
        return lookups.get_receipt(conn, handle)
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
    scope: ScopeOrScopes,
    words: Sequence[str],
    now: datetime,
    *,
    min_score: float,
    kinds: Sequence[Kind],
    pool: int,
    ttl: TtlConfig = DEFAULT_TTL,
) -> list[tuple[Ranked, float]]:
    """Loadable memories readable by `scope`, most relevant first, then most recent.

    The statement is cached per shape (dialect, number of scopes, words or not, TTL
    configuration) and everything else is a bound parameter: loading runs at the
    start of every run, and building and compiling the SQL would cost more than
    executing it.
    """
    scopes = list(scope.readable() if isinstance(scope, Scope) else scope)
    if not scopes:
        return []
    statement = _pool_statement(conn.dialect.name, len(scopes), bool(words), ttl)
    params: dict[str, Any] = {
        "now": now,
        **cutoff_values(now, ttl),
        "min_score": min_score,
        "kinds": [k.value for k in kinds],
        "limit": pool,
    }
    params.update(_scope_params(scopes))
    if words:
        params["match"] = fulltext.match_text(list(words), conn.dialect.name)
    return [
        (Ranked(r[0], Kind(r[1]), r[2], r[3], r[4], r[5]), float(r[6]))
        for r in conn.execute(statement, params)
    ]


def load_pools(
    conn: Connection,
    scopes: Sequence[Scope],
    words: Sequence[str],
    now: datetime,
    *,
    min_score: float,
    hot: tuple[Sequence[Kind], int],
    cold: tuple[Sequence[Kind], int],
    ttl: TtlConfig = DEFAULT_TTL,
) -> tuple[list[tuple[Ranked, float]], list[tuple[Ranked, float]], dict[str, Any]]:
    """The hot and the cold ranking pools of a load in one round trip, and every
    pool row in full by id (for `Memory.from_row`), so the winners need no second
    query.

    A load used to fetch the pools light, then the winners by id: two round trips,
    the larger part of a load's time. The pools are bounded (`hot` and `cold`
    limits), so carrying whole rows costs a few kilobytes; only the winners are
    ever made into `Memory` objects.
    """
    if not scopes:
        return [], [], {}
    dialect = conn.dialect.name
    now = _aware(now)
    params: dict[str, Any] = {
        "now": now,
        **cutoff_values(now, ttl),
        "min_score": min_score,
        "hot_kinds": [k.value for k in hot[0]],
        "hot_limit": hot[1],
        "cold_kinds": [k.value for k in cold[0]],
        "cold_limit": cold[1],
        **_scope_params(scopes),
    }
    if words:
        params["match"] = fulltext.match_text(list(words), dialect)
    if dialect == "postgresql":
        result = _load_driver_statement(len(scopes), bool(words), ttl).execute(conn, params)
    else:
        result = conn.execute(_load_statement(dialect, len(scopes), bool(words), ttl), params)
    pools: tuple[list[tuple[Ranked, float]], list[tuple[Ranked, float]]] = ([], [])
    rows: dict[str, Any] = {}
    names = list(result.keys())
    at = {name: names.index(name) for name in _RANKED_COLUMNS}
    i_id, i_kind, i_content, i_conf, i_score, i_last, i_rel, i_pool = at.values()
    for r in result:
        ranked = Ranked(r[i_id], Kind(r[i_kind]), r[i_content], r[i_conf], r[i_score], r[i_last])
        pools[r[i_pool]].append((ranked, float(r[i_rel])))
        rows[ranked.id] = (names, r)
    return pools[0], pools[1], rows


_RANKED_COLUMNS = (
    "id",
    "kind",
    "content",
    "confidence",
    "score",
    "last_reinforced_at",
    "relevance",
    "pool",
)


def memory_from_pool_row(row: tuple[list[str], Sequence[Any]]) -> Memory:
    """A pool row of `load_pools` (column names, values) as a `Memory`, its times in
    UTC like every read's (on PostgreSQL the pool is read on the driver, in the
    session's time zone)."""
    values = dict(zip(*row, strict=True))
    for name in _TIMES:
        if values[name] is not None:
            values[name] = values[name].astimezone(UTC)
    return Memory.from_row(values)


_TIMES = tuple(c.name for c in ROW if isinstance(c.type, Timestamp))


def _aware(value: datetime) -> datetime:
    if value.tzinfo is None:
        raise ValueError("naive datetime refused: pass an aware UTC datetime")
    return value.astimezone(UTC)


@functools.lru_cache(maxsize=16)
def _load_driver_statement(scopes: int, words: bool, ttl: TtlConfig) -> DriverStatement:
    return DriverStatement.compile(_load_statement("postgresql", scopes, words, ttl))


@functools.lru_cache(maxsize=16)
def _load_statement(dialect: str, scopes: int, words: bool, ttl: TtlConfig) -> Any:
    """Both pools in one scan: number the rows within hot and within cold by rank
    order, keep the first `hot_limit` and `cold_limit` of each.

    The TTL configuration is part of the statement (fixed per process, so compiled
    once); its cutoffs are parameters (`expiry.cutoff_values`)."""
    hot = one_of(memories.c.kind, "hot_kinds", dialect)
    # Constants as SQL literals, not parameters: the PostgreSQL statement is
    # prepared, and an untyped parameter would come back as text.
    zero: ColumnElement[int] = literal_column("0")
    one: ColumnElement[int] = literal_column("1")
    pool = case((hot, zero), else_=one)
    query = select(*ROW).where(
        _readable_params(scopes),
        memories.c.status == Status.ACTIVE.value,
        or_(memories.c.valid_to.is_(None), memories.c.valid_to > bindparam("now")),
        within_ttl(ttl, cutoff_param),
        memories.c.score >= bindparam("min_score"),
        or_(hot, one_of(memories.c.kind, "cold_kinds", dialect)),
    )
    if words:
        query = fulltext.with_relevance_param(query, dialect)
    else:
        query = query.add_columns(literal_column("0.0").label("relevance"))
    relevance = query.selected_columns.relevance
    numbered = query.add_columns(
        pool.label("pool"),
        func.row_number()
        .over(
            partition_by=pool,
            order_by=(relevance.desc(), memories.c.last_reinforced_at.desc(), memories.c.id),
        )
        .label("rn"),
    ).subquery("ranked")
    return select(*numbered.c).where(
        or_(
            and_(numbered.c.pool == zero, numbered.c.rn <= bindparam("hot_limit")),
            and_(numbered.c.pool == one, numbered.c.rn <= bindparam("cold_limit")),
        )
    )


@functools.lru_cache(maxsize=32)
def _pool_statement(
    dialect: str, scopes: int, words: bool, ttl: TtlConfig, pool: str = ""
) -> Select[Any]:
    readable = _readable_params(scopes)
    light = (
        memories.c.id,
        memories.c.kind,
        memories.c.content,
        memories.c.confidence,
        memories.c.score,
        memories.c.last_reinforced_at,
    )
    query = select(*light).where(
        readable,
        memories.c.status == Status.ACTIVE.value,
        or_(memories.c.valid_to.is_(None), memories.c.valid_to > bindparam("now")),
        within_ttl(ttl, cutoff_param),
        memories.c.score >= bindparam("min_score"),
        memories.c.kind.in_(bindparam(f"{pool}kinds", expanding=True)),
    )
    if words:
        query = fulltext.with_relevance_param(query, dialect)
    else:
        query = query.add_columns(literal(0.0).label("relevance"))
    return query.order_by(
        fulltext_order(), memories.c.last_reinforced_at.desc(), memories.c.id
    ).limit(bindparam(f"{pool}limit"))


def fulltext_order() -> Any:
    return literal_column("relevance").desc()


def search(
    conn: Connection,
    scope: ScopeOrScopes,
    words: Sequence[str],
    now: datetime,
    *,
    limit: int,
    min_score: float,
    ttl: TtlConfig = DEFAULT_TTL,
) -> list[tuple[Memory, float]]:
    if not words:
        return []
    query = select(*ROW).where(readable_by(scope), loadable(now, min_score, ttl))
    query = fulltext.matching(query, list(words), conn.dialect.name)
    query = query.order_by(
        fulltext_order(), memories.c.last_reinforced_at.desc(), memories.c.id
    ).limit(limit)
    return [(Memory.from_row(r), float(r["relevance"])) for r in conn.execute(query).mappings()]


def listing(
    conn: Connection, scope: ScopeOrScopes, *, statuses: Sequence[Status] | None, limit: int
) -> list[Memory]:
    query = select(*ROW).where(readable_by(scope))
    if statuses is not None:
        query = query.where(memories.c.status.in_([s.value for s in statuses]))
    query = query.order_by(memories.c.created_at.desc(), memories.c.id).limit(limit)
    return [Memory.from_row(r) for r in conn.execute(query).mappings()]


def history(conn: Connection, scope: ScopeOrScopes, key: str) -> list[Memory]:
    query = (
        select(*ROW)
        .where(readable_by(scope), memories.c.key == key)
        .order_by(memories.c.valid_from, memories.c.created_at, memories.c.id)
    )
    return [Memory.from_row(r) for r in conn.execute(query).mappings()]


def by_ids(conn: Connection, scope: ScopeOrScopes, ids: Sequence[str]) -> list[Memory]:
    scopes = list(scope.readable() if isinstance(scope, Scope) else scope)
    if not ids or not scopes:
        return []
    params = {"ids": list(ids), **_scope_params(scopes)}
    result = conn.execute(_by_ids_statement(len(scopes)), params).mappings()
    return [Memory.from_row(r) for r in result]


@functools.lru_cache(maxsize=8)
def _by_ids_statement(scopes: int) -> Select[Any]:
    return select(*ROW).where(
        _readable_params(scopes), memories.c.id.in_(bindparam("ids", expanding=True))
    )


def _readable_params(scopes: int) -> ColumnElement[bool]:
    """`readable_among` with the scopes as parameters t0/u0/a0…, for cached statements."""
    return or_(
        *(
            and_(
                memories.c.tenant == bindparam(f"t{i}"),
                memories.c.user_id == bindparam(f"u{i}"),
                memories.c.agent_id == bindparam(f"a{i}"),
            )
            for i in range(scopes)
        )
    )


def _scope_params(scopes: Sequence[Scope]) -> dict[str, str]:
    params: dict[str, str] = {}
    for i, s in enumerate(scopes):
        params.update({f"t{i}": s.tenant, f"u{i}": s.user, f"a{i}": s.agent})
    return params
