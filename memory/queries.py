"""Named queries over the memory tables. Every read takes the scopes its caller may
read and filters by them inside the SQL, so isolation never depends on the caller.
"""

from __future__ import annotations

import enum
import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    and_,
    bindparam,
    case,
    false,
    insert,
    or_,
    select,
    update,
)

from memory import fulltext, lookups, write_audit
from memory.expiry import (
    DEFAULT_TTL,
    TtlConfig,
    literal_cutoff,
    within_ttl,
)
from memory.folding import folded_key
from memory.port import AuditEntry, trail_end
from memory.receipts import Decision, WriteReceipt
from memory.records import Memory, Scope, Status, content_hash
from memory.tables import (
    ACTIVE_ROW,
    KEYED_ROW,
    MEMORY_COLUMNS,
    audit,
    memories,
    receipts,
    utc,
)

ScopeOrScopes = Scope | Sequence[Scope]
ROW = MEMORY_COLUMNS
"""The columns a `Memory` is built from (the derived ones stay in the database)."""


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
        ACTIVE_ROW,
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
        key_folded=folded_key(memory.key),
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
    """The active row of `key`'s slot in `scope`, however either is spelled."""
    slot = memories.c.key_folded == folded_key(key)
    query = select(*ROW).where(in_scope(scope), slot, KEYED_ROW, ACTIVE_ROW)
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
    these idempotency keys (exact), and the active row of each of these slots
    (`slots`: folded keys, `folding.folded_key`)."""
    if conn.dialect.name == "postgresql":
        by_idem, active, _ = lookups.existing(conn, idempotency, slots)
        return by_idem, active
    arms = []
    if idempotency:
        arms.append(_scope_key_in(memories.c.idempotency_key, idempotency))
    if slots:
        arms.append(and_(_scope_key_in(memories.c.key_folded, slots), KEYED_ROW, ACTIVE_ROW))
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
        (m.scope, folded_key(m.key)): m
        for m in found
        if m.status is Status.ACTIVE and (m.scope, folded_key(m.key)) in wanted_slots
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


def audit_trail(
    conn: Connection, tenant: str, memory_id: str, limit: int, newest: bool = False
) -> list[AuditEntry]:
    """The tenant's trail (a memory's, given its id), oldest first, an apply's rows read
    as the entries they hold (`memory.write_audit`): the first `limit` entries, or with
    `newest` the last. Each stored row holds at least one entry, so `limit` rows from
    the chosen end hold all the entries wanted."""
    query = select(audit).where(audit.c.tenant == tenant)
    if memory_id:
        query = query.where(
            or_(audit.c.memory_id == memory_id, write_audit.naming([memory_id], conn.dialect.name))
        )
    rows = [
        AuditEntry(
            at=r["at"],
            actor=r["actor"],
            action=r["action"],
            memory_id=r["memory_id"],
            tenant=r["tenant"],
            detail=json.loads(r["detail"] or "{}"),
        )
        for r in conn.execute(
            query.order_by(audit.c.id.desc() if newest else audit.c.id).limit(limit)
        ).mappings()
    ]
    if newest:
        rows.reverse()
    found = get_receipts(conn, write_audit.handles(rows))
    entries: list[AuditEntry] = []
    for row in rows:
        if row.action != write_audit.BATCH:
            entries.append(row)
            continue
        receipt = found.get(row.detail["handle"])
        held = write_audit.expand(row, receipt)
        if memory_id and receipt is not None:
            held = [e for e in held if e.memory_id == memory_id]
        entries.extend(held)
    return trail_end(entries, limit, newest)


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
    return get_receipts(conn, [handle]).get(handle)


def get_receipts(conn: Connection, handles: Sequence[str]) -> dict[str, WriteReceipt]:
    """The stored receipts of `handles`, by handle (a handle never applied is absent)."""
    found = {}
    for start in range(0, len(handles), 500):
        query = select(receipts).where(receipts.c.handle.in_(handles[start : start + 500]))
        for row in conn.execute(query).mappings():
            found[row["handle"]] = WriteReceipt(
                handle=row["handle"],
                tenant=row["tenant"],
                run_id=row["run_id"],
                created_at=utc(row["created_at"]),
                decisions=tuple(Decision.from_json(d) for d in json.loads(row["decisions"])),
            )
    return found


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
        fulltext.relevance_order(), memories.c.last_reinforced_at.desc(), memories.c.id
    ).limit(limit)
    return [(Memory.from_row(r), float(r["relevance"])) for r in conn.execute(query).mappings()]


def listing(
    conn: Connection,
    scope: ScopeOrScopes,
    *,
    statuses: Sequence[Status] | None,
    limit: int,
    whole_tenant: bool = False,
) -> list[Memory]:
    if whole_tenant:
        tenant = scope.tenant if isinstance(scope, Scope) else scope[0].tenant
        query = select(*ROW).where(memories.c.tenant == tenant)
    else:
        query = select(*ROW).where(readable_by(scope))
    if statuses is not None:
        query = query.where(memories.c.status.in_([s.value for s in statuses]))
    query = query.order_by(memories.c.created_at.desc(), memories.c.id).limit(limit)
    return [Memory.from_row(r) for r in conn.execute(query).mappings()]


def history(conn: Connection, scope: ScopeOrScopes, key: str) -> list[Memory]:
    """Every version of `key`'s slot, whatever spelling each was written in."""
    query = (
        select(*ROW)
        .where(
            readable_by(scope),
            memories.c.key_folded == folded_key(key),
            KEYED_ROW if key else memories.c.key == "",
        )
        .order_by(memories.c.valid_from, memories.c.created_at, memories.c.id)
    )
    return [Memory.from_row(r) for r in conn.execute(query).mappings()]


def by_ids(conn: Connection, scope: ScopeOrScopes, ids: Sequence[str]) -> list[Memory]:
    scopes = list(scope.readable() if isinstance(scope, Scope) else scope)
    if not ids or not scopes:
        return []
    params = {"ids": list(ids), **scope_params(scopes)}
    result = conn.execute(_by_ids_statement(len(scopes)), params).mappings()
    return [Memory.from_row(r) for r in result]


@functools.lru_cache(maxsize=8)
def _by_ids_statement(scopes: int) -> Select[Any]:
    return select(*ROW).where(
        readable_params(scopes), memories.c.id.in_(bindparam("ids", expanding=True))
    )


def readable_params(scopes: int) -> ColumnElement[bool]:
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


def scope_params(scopes: Sequence[Scope]) -> dict[str, str]:
    params: dict[str, str] = {}
    for i, s in enumerate(scopes):
        params.update({f"t{i}": s.tenant, f"u{i}": s.user, f"a{i}": s.agent})
    return params
