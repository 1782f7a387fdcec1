"""The in-memory backend: a real adapter over dicts, for fast tests and embedding.

It implements the same port as `memory.sql.SqlBackend` and runs the same write
rules (`memory.unit.perform`), so the contract suite holds it to the same
behaviour. A batch is atomic: it works on a copy of the state and swaps it in only
when every op succeeded; a lock serialises batches. Rows are kept by scope and
indexed by id and idempotency key, as the SQL tables are, so an apply's cost
follows its batch and the scopes it reads, not the size of the store. Full text is a small
stand-in for the databases' (lower-cased words, a light suffix stemmer, relevance
by matched terms), enough for ranking and search to behave alike.

Like procrastinate's `InMemoryConnector`, it records every op it was asked to
perform (`ops`), so a test can assert on what reached the store.
"""

from __future__ import annotations

import dataclasses
import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory.expiry import is_expired
from memory.folding import folded_key
from memory.loading import Ranked
from memory.port import (
    AuditEntry,
    AuditOp,
    HistoryOp,
    ListOp,
    MemoryBackend,
    Op,
    PoolOp,
    SearchOp,
    trail_end,
)
from memory.receipts import WriteReceipt
from memory.records import Memory, Scope, Status
from memory.unit import Existing, perform
from memory.write_audit import WriteAudit

_WORD = re.compile(r"[^\W_]+")  # letters or digits of any script, as `memory.fulltext`


def stem(word: str) -> str:
    """A light English stemmer: retries → retri, webhooks → webhook, rotated → rotat."""
    for suffix, repl in (("ies", "i"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""), ("y", "i")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: len(word) - len(suffix)] + repl
    return word


def relevance(content: str, words: Sequence[str]) -> float:
    """Matched query stems, weighted by frequency and damped by length; 0 when none match."""
    tokens = [stem(w) for w in _WORD.findall(content.lower())]
    if not tokens or not words:
        return 0.0
    hits = sum(tokens.count(stem(w)) for w in dict.fromkeys(words))
    return hits / math.sqrt(len(tokens)) if hits else 0.0


@dataclass
class _State:
    """Memories by scope (each scope's rows by id, in the order written) with two
    indexes, the receipts and the audit trail.

    A batch works on a copy. The copy shares each scope's rows with the state it
    came from until it first changes that scope (`put`), so a batch costs what it
    touches, and finding a row by id or by idempotency key is a dict lookup, not a
    scan of the store.
    """

    scopes: dict[Scope, dict[str, Memory]] = field(default_factory=dict)
    scope_of: dict[str, Scope] = field(default_factory=dict)  # memory id → its scope
    idempotent: dict[tuple[Scope, str], str] = field(default_factory=dict)  # → memory id
    receipts: dict[str, WriteReceipt] = field(default_factory=dict)
    audit: list[AuditEntry] = field(default_factory=list)
    owned: set[Scope] = field(default_factory=set)  # scopes whose rows this copy may change

    def copy(self) -> _State:
        return _State(
            dict(self.scopes),
            dict(self.scope_of),
            dict(self.idempotent),
            dict(self.receipts),
            list(self.audit),
        )

    def get(self, memory_id: str) -> Memory | None:
        scope = self.scope_of.get(memory_id)
        return None if scope is None else self.scopes[scope][memory_id]

    def put(self, memory: Memory) -> None:
        """Store `memory` (new, or a new version of a row; its scope never changes)."""
        if memory.scope not in self.owned:
            self.scopes[memory.scope] = dict(self.scopes.get(memory.scope, {}))
            self.owned.add(memory.scope)
        rows = self.scopes[memory.scope]
        before = rows.get(memory.id)
        if before is not None and before.idempotency_key != memory.idempotency_key:
            del self.idempotent[(before.scope, before.idempotency_key)]
        rows[memory.id] = memory
        self.scope_of[memory.id] = memory.scope
        self.idempotent[(memory.scope, memory.idempotency_key)] = memory.id


class InMemoryBackend(MemoryBackend):
    """Memory in this process. Thread-safe; lost when the process ends."""

    def __init__(self) -> None:
        self._state = _State()
        self._lock = threading.Lock()
        self.ops: list[Op] = []

    def batch(self, ops: Sequence[Op]) -> list[Any]:
        with self._lock:
            self.ops.extend(ops)
            staged = self._state.copy()
            rows = InMemoryRows(staged)
            results = [perform(rows, op) for op in ops]
            self._state = staged
            return results


def _light(m: Memory) -> Ranked:
    return Ranked(m.id, m.kind, m.content, m.confidence, m.score, m.last_reinforced_at)


class InMemoryRows:
    """`memory.unit.RowAccess` over one staged copy of the state."""

    def __init__(self, state: _State) -> None:
        self.state = state

    def _all(self, readable: Sequence[Scope]) -> list[Memory]:
        empty: dict[str, Memory] = {}
        return [m for scope in readable for m in self.state.scopes.get(scope, empty).values()]

    def by_idempotency_key(self, scope: Scope, key: str) -> Memory | None:
        memory_id = self.state.idempotent.get((scope, key))
        return None if memory_id is None else self.state.get(memory_id)

    def active_by_key(self, scope: Scope, key: str) -> Memory | None:
        slot = folded_key(key)
        return next(
            (
                m
                for m in self._all([scope])
                if m.key and folded_key(m.key) == slot and m.status is Status.ACTIVE
            ),
            None,
        )

    def by_idempotency_keys(
        self, pairs: Sequence[tuple[Scope, str]]
    ) -> dict[tuple[Scope, str], Memory]:
        found = (self.by_idempotency_key(scope, key) for scope, key in pairs)
        return {(m.scope, m.idempotency_key): m for m in found if m is not None}

    def active_by_keys(self, pairs: Sequence[tuple[Scope, str]]) -> dict[tuple[Scope, str], Memory]:
        """The active row of each (scope, folded key), by that pair."""
        found = (self.active_by_key(scope, key) for scope, key in pairs)
        return {(m.scope, folded_key(m.key)): m for m in found if m is not None}

    def ask_existing(
        self, idempotency: Sequence[tuple[Scope, str]], slots: Sequence[tuple[Scope, str]]
    ) -> Callable[[], Existing]:
        found = self.by_idempotency_keys(idempotency), self.active_by_keys(slots)
        return lambda: found

    def settled(self, slots: Mapping[tuple[Scope, str], Memory | None]) -> None:
        """Nothing to remember here; the writer's account is checked against the rows
        instead, so every in-memory test holds `known_slots`' premise to account."""
        for (scope, slot), told in slots.items():
            held = self.active_by_key(scope, slot)
            if held != told:
                raise RuntimeError(
                    f"the apply says slot {slot!r} of {scope} holds"
                    f" {told.id if told else 'nothing'}, the rows {held.id if held else 'nothing'}"
                )

    def insert_many(self, memories: Sequence[Memory]) -> None:
        for memory in memories:
            if memory.id in self.state.scope_of or self.by_idempotency_key(
                memory.scope, memory.idempotency_key
            ):
                raise ValueError(f"memory {memory.id} or its idempotency key is already stored")
            self.state.put(memory)

    def update(
        self, memory_id: str, changes: Mapping[str, Any], *, expected_version: int | None = None
    ) -> bool:
        found = self.state.get(memory_id)
        if found is None or (expected_version is not None and found.version != expected_version):
            return False
        self.state.put(dataclasses.replace(found, **changes))
        return True

    def supersede_many(self, successors: Mapping[str, str], now: datetime) -> None:
        for old_id, new_id in successors.items():
            old = self.state.get(old_id)
            if old is None:
                raise KeyError(f"no memory {old_id!r} to supersede")
            self.state.put(
                dataclasses.replace(
                    old,
                    status=Status.SUPERSEDED,
                    superseded_at=now,
                    valid_to=now,
                    superseded_by_id=new_id,
                    version=old.version + 1,
                )
            )

    def record_audit(self, entries: Sequence[AuditEntry]) -> None:
        self.state.audit.extend(entries)

    def save_receipt(self, receipt: WriteReceipt, audit: WriteAudit) -> None:
        self.state.receipts[receipt.handle] = receipt
        self.state.audit.extend(audit.entries(receipt))

    def get_receipt(self, handle: str) -> WriteReceipt | None:
        return self.state.receipts.get(handle)

    def _loadable(self, op: PoolOp | SearchOp) -> list[Memory]:
        return [
            m
            for m in self._all(op.readable)
            if m.status is Status.ACTIVE
            and not is_expired(m, op.now, op.ttl)
            and m.score >= op.min_score
        ]

    @staticmethod
    def _ranked(pairs: list[tuple[Memory, float]], limit: int) -> list[tuple[Memory, float]]:
        pairs.sort(key=lambda p: p[0].id)
        pairs.sort(key=lambda p: (p[1], p[0].last_reinforced_at), reverse=True)
        return pairs[:limit]

    def pool(self, op: PoolOp) -> list[tuple[Ranked, float]]:
        pairs = [
            (m, relevance(m.content, op.words)) for m in self._loadable(op) if m.kind in op.kinds
        ]
        return [(_light(m), rel) for m, rel in self._ranked(pairs, op.limit)]

    def pools(
        self, hot: PoolOp, cold: PoolOp
    ) -> tuple[list[tuple[Ranked, float]], list[tuple[Ranked, float]]]:
        return self.pool(hot), self.pool(cold)

    def search(self, op: SearchOp) -> list[tuple[Memory, float]]:
        pairs = [(m, relevance(m.content, op.words)) for m in self._loadable(op)]
        return self._ranked([p for p in pairs if p[1] > 0], op.limit)

    def listing(self, op: ListOp) -> list[Memory]:
        scopes: Sequence[Scope] = op.readable
        if op.whole_tenant:
            tenant = op.readable[0].tenant
            scopes = [s for s in self.state.scopes if s.tenant == tenant]
        found = [m for m in self._all(scopes) if op.statuses is None or m.status in op.statuses]
        found.sort(key=lambda m: m.id)
        found.sort(key=lambda m: m.created_at, reverse=True)
        return found[: op.limit]

    def history(self, op: HistoryOp) -> list[Memory]:
        slot = folded_key(op.key)
        found = [
            m
            for m in self._all(op.readable)
            if folded_key(m.key) == slot and bool(m.key) == bool(op.key)
        ]
        return sorted(found, key=lambda m: (m.valid_from, m.created_at, m.id))

    def by_ids(self, readable: Sequence[Scope], ids: Sequence[str]) -> list[Memory]:
        allowed = set(readable)
        found = (self.state.get(memory_id) for memory_id in dict.fromkeys(ids))
        return [m for m in found if m is not None and m.scope in allowed]

    def audit_trail(self, op: AuditOp) -> list[AuditEntry]:
        found = [
            e
            for e in self.state.audit
            if e.tenant == op.tenant and (not op.memory_id or e.memory_id == op.memory_id)
        ]
        return trail_end(found, op.limit, op.newest)
