"""How every backend performs an op: the rules once, over a backend's `RowAccess`.

A backend opens a transaction, wraps it in a `RowAccess` (a handful of row-level
reads and writes) and hands each op to `perform`. The write rules — the gate,
idempotency, supersession, review, edits with optimistic concurrency, the audit
trail — live in `memory.writing` and run unchanged on SQL and in memory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from memory.loading import COLD_KINDS, HOT_KINDS, Loaded, Ranked, bound, rank
from memory.port import (
    ApplyOp,
    AuditEntry,
    AuditOp,
    EditOp,
    GetOp,
    HistoryOp,
    ListOp,
    LoadOp,
    Op,
    PoolOp,
    ReceiptOp,
    ReviewOp,
    SearchOp,
)
from memory.receipts import WriteReceipt
from memory.records import Memory, Scope
from memory.write_audit import WriteAudit
from memory.writing import apply, edit, review

Existing = tuple[dict[tuple[Scope, str], Memory], dict[tuple[Scope, str], Memory]]
"""What an apply reads first: rows by (scope, idempotency key), active rows by (scope, key)."""


class RowAccess(Protocol):
    """Row-level access inside one open transaction. Reads filter by `readable` themselves."""

    def active_by_key(self, scope: Scope, key: str) -> Memory | None: ...

    def ask_existing(
        self, idempotency: Sequence[tuple[Scope, str]], slots: Sequence[tuple[Scope, str]]
    ) -> Callable[[], Existing]:
        """Rows holding these idempotency keys, and the active row of each slot: asked
        now, answered when the returned function is called (a backend may let the
        database work meanwhile). Call it once, before any other use of the rows."""
        ...

    def settled(self, slots: Mapping[tuple[Scope, str], Memory | None]) -> None:
        """What the apply's slots hold once its writes land (the active row, or None): a
        backend may remember it (`memory.known_slots`) until the transaction commits."""
        ...

    def insert_many(self, memories: Sequence[Memory]) -> None: ...

    def supersede_many(self, successors: Mapping[str, str], now: datetime) -> None:
        """Mark each `old id → new id` superseded at `now` (status, times, link, version)."""
        ...

    def update(
        self, memory_id: str, changes: Mapping[str, Any], *, expected_version: int | None = None
    ) -> bool:
        """Set `changes` (Memory field names); False when `expected_version` no longer holds."""
        ...

    def record_audit(self, entries: Sequence[AuditEntry]) -> None: ...

    def save_receipt(self, receipt: WriteReceipt, audit: WriteAudit) -> None:
        """Keep `receipt`, and record its audit trail (`memory.write_audit`)."""
        ...

    def get_receipt(self, handle: str) -> WriteReceipt | None: ...

    def pool(self, op: PoolOp) -> list[tuple[Ranked, float]]: ...

    def pools(
        self, hot: PoolOp, cold: PoolOp
    ) -> tuple[list[tuple[Ranked, float]], list[tuple[Ranked, float]]]:
        """Two pools of the same reader, words, time and TTL, in one round trip where possible."""
        ...

    def search(self, op: SearchOp) -> list[tuple[Memory, float]]: ...

    def listing(self, op: ListOp) -> list[Memory]: ...

    def history(self, op: HistoryOp) -> list[Memory]: ...

    def by_ids(self, readable: Sequence[Scope], ids: Sequence[str]) -> list[Memory]: ...

    def audit_trail(self, op: AuditOp) -> list[AuditEntry]: ...


def perform(rows: RowAccess, op: Op) -> Any:
    """The result of one op; the caller owns the transaction around a batch of them."""
    match op:
        case ApplyOp():
            return apply(rows, op)
        case EditOp():
            return edit(rows, op)
        case ReviewOp():
            return review(rows, op)
        case LoadOp():
            return load(rows, op)
        case PoolOp():
            return rows.pool(op)
        case SearchOp():
            return rows.search(op) if op.words else []
        case ListOp():
            return rows.listing(op)
        case HistoryOp():
            return rows.history(op)
        case GetOp():
            return rows.by_ids(op.readable, op.ids) if op.ids else []
        case ReceiptOp():
            return rows.get_receipt(op.handle)
        case AuditOp():
            return rows.audit_trail(op)
    raise TypeError(f"unknown memory op {type(op).__name__}")


def load(rows: RowAccess, op: LoadOp) -> Loaded:
    """Rank light rows of the hot and cold pools, then fetch only the winners in full."""
    hot_pool, cold_pool = rows.pools(
        PoolOp(op.readable, op.words, op.now, op.min_score, HOT_KINDS, op.limit, op.ttl),
        PoolOp(op.readable, op.words, op.now, op.min_score, COLD_KINDS, op.limit * 3, op.ttl),
    )
    hot = bound(rank(hot_pool, op.now), op.limit, op.max_chars // 2)
    left_chars = op.max_chars - sum(len(m.content) for m in hot)
    cold = bound(rank(cold_pool, op.now), op.limit - len(hot), left_chars)
    chosen = [m.id for m in (*hot, *cold)]
    full = {m.id: m for m in rows.by_ids(op.readable, chosen)} if chosen else {}
    return Loaded(
        tuple(full[m.id] for m in hot if m.id in full),
        tuple(full[m.id] for m in cold if m.id in full),
    )
