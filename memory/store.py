"""The store: the one object through which memory is written, loaded and read.

    store = open_store("sqlite:///memory.db")   # or Store.in_memory()
    store.create_schema()                       # or `nightshift db upgrade`
    receipt = store.apply([candidate], handle="run-1:write", actor="writer")
    loaded = store.load(Scope("acme", "ana", "triage"), goal="renewals", trigger="",
                        rules=rules_for("triage"), origin="private")

Every method is built on the backend's one `batch(ops)` (`memory.port`), so the
SQL and in-memory backends cannot drift apart. `apply` is what the memory writer
calls; `edit` and `review` are the operator's; everything else is a read, and
every read is confined to the reader's scope and the layers above it — narrowed
further, for an agent's run, by its attachment and the trigger's origin.

`ttl` (per kind and layer; NIGHTSHIFT_MEMORY_TTL for the workers and the CLI) is
applied by `load` and `search` as they read: a memory past its TTL is not loaded
from that moment on, before maintenance marks it expired.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Engine

from memory import fulltext
from memory.access import readable_scopes
from memory.engine import open_engine
from memory.expiry import DEFAULT_TTL, TtlConfig
from memory.inmemory import InMemoryBackend
from memory.loading import Loaded
from memory.policy import AgentRules
from memory.port import (
    ApplyOp,
    AuditEntry,
    AuditOp,
    EditOp,
    EditResult,
    GetOp,
    HistoryOp,
    ListOp,
    LoadOp,
    MemoryBackend,
    ReceiptOp,
    ReviewOp,
    RulesFor,
    SearchOp,
)
from memory.receipts import WriteReceipt
from memory.records import Candidate, Kind, Memory, Scope, Status
from memory.sql import SqlBackend
from memory.storable import scope_problems, unstorable

Clock = Callable[[], datetime]


def utcnow() -> datetime:
    return datetime.now(UTC)


def _default_rules(agent: str) -> AgentRules:
    return AgentRules.default()


MAX_ROWS = 100_000
"""The most rows one read returns (`limit`); an export reads a scope whole."""
MAX_LOADED = 1000
"""The most memories one load gives a run (`LoadBounds.limit`)."""


def _rows(limit: int) -> int:
    """`limit` if a read may return that many rows; a clear error otherwise (PostgreSQL
    refused a negative LIMIT, SQLite read it as none, the in-memory store dropped rows)."""
    if not 0 <= limit <= MAX_ROWS:
        raise ValueError(f"limit must be between 0 and {MAX_ROWS}, not {limit}")
    return limit


def _readable(scope: Scope) -> tuple[Scope, ...]:
    """The scopes `scope` reads, once it is one the store could hold at all."""
    if problems := scope_problems(scope):
        raise ValueError("; ".join(problems))
    return scope.readable()


def _text(name: str, value: str) -> str:
    if what := unstorable(value):
        raise ValueError(f"{name} holds {what}; nothing stored could match it")
    return value


@dataclass(frozen=True, slots=True)
class LoadBounds:
    limit: int = 20
    max_chars: int = 8000
    min_score: float = 0.25

    def __post_init__(self) -> None:
        if not 0 <= self.limit <= MAX_LOADED:
            raise ValueError(f"a load's limit must be between 0 and {MAX_LOADED}, not {self.limit}")
        if self.max_chars < 0:
            raise ValueError(f"a load's max_chars must not be negative, not {self.max_chars}")


class Store:
    """Memory over a backend: SQL (PostgreSQL or SQLite) for an engine, or in memory.

    `ttl` is how long an unreinforced memory stays loadable, per kind and layer.
    """

    def __init__(
        self,
        engine: Engine | None = None,
        *,
        clock: Clock = utcnow,
        backend: MemoryBackend | None = None,
        ttl: TtlConfig = DEFAULT_TTL,
    ) -> None:
        if backend is None:
            if engine is None:
                raise ValueError("a Store needs an engine or a backend")
            backend = SqlBackend(engine)
        self.engine = engine
        self.backend = backend
        self.clock = clock
        self.ttl = ttl

    @classmethod
    def in_memory(cls, *, clock: Clock = utcnow, ttl: TtlConfig = DEFAULT_TTL) -> Store:
        return cls(clock=clock, backend=InMemoryBackend(), ttl=ttl)

    def create_schema(self) -> None:
        """Create the tables directly (tests, embedded use). Production uses Alembic."""
        self.backend.create_schema()

    # -- writing -------------------------------------------------------------

    def apply(
        self,
        candidates: Sequence[Candidate],
        *,
        handle: str,
        actor: str,
        rules_for: RulesFor = _default_rules,
    ) -> WriteReceipt:
        """Judge and apply `candidates` in one transaction; return the receipt.

        Idempotent twice over: a receipt handle seen before returns the stored
        receipt untouched, and each candidate's idempotency key admits one row.
        """
        op = ApplyOp(tuple(candidates), handle, actor, rules_for, self.clock())
        result: WriteReceipt = self.backend.batch([op])[0]
        return result

    def refuse(
        self, candidates: Sequence[Candidate], *, handle: str, actor: str, rule: str, reason: str
    ) -> WriteReceipt:
        """Record `candidates` as refused with `rule` and `reason`, unjudged: a receipt
        and an audit entry each, nothing stored. For a batch that cannot be applied
        at all (one that took its writer down on every attempt). Like `apply`, a
        handle seen before returns the stored receipt untouched."""
        op = ApplyOp(tuple(candidates), handle, actor, _default_rules, self.clock(), (rule, reason))
        result: WriteReceipt = self.backend.batch([op])[0]
        return result

    def edit(
        self,
        scope: Scope,
        memory_id: str,
        *,
        version: int,
        content: str,
        actor: str,
        reason: str = "",
        force: bool = False,
    ) -> EditResult:
        """Replace a memory's content if it is still at `version`.

        Raises `EditConflict` (carrying the stored version) when it moved on,
        unless `force`; a forced edit is audited as ``edit.forced``.
        """
        op = EditOp(
            scope.readable(), memory_id, version, content, actor, reason, force, self.clock()
        )
        result: EditResult = self.backend.batch([op])[0]
        return result

    def review(
        self, scope: Scope, memory_id: str, *, approve: bool, actor: str, reason: str = ""
    ) -> Memory:
        """Approve (activate; supersede the key's active value) or reject a pending memory."""
        op = ReviewOp(scope.readable(), memory_id, approve, actor, reason, self.clock())
        result: Memory = self.backend.batch([op])[0]
        return result

    # -- reading -------------------------------------------------------------

    def load(
        self,
        scope: Scope,
        *,
        goal: str = "",
        trigger: str = "",
        bounds: LoadBounds = LoadBounds(),
        rules: AgentRules | None = None,
        origin: str | None = None,
    ) -> Loaded:
        """What a run of `scope` is given at its start: hot first, then ranked, bounded.

        `rules` is the agent's attachment and `origin` where the run's trigger came
        from; with rules given, the person's layers are loaded only for an origin
        the rules allow (default: a private trigger). Without rules (an operator's
        read) the scope's whole chain is read.
        """
        _readable(scope)
        readable = readable_scopes(scope, rules, origin=origin)
        if not readable:
            return Loaded((), ())
        words = tuple(fulltext.terms(f"{goal} {trigger}"))
        op = LoadOp(
            readable,
            words,
            self.clock(),
            bounds.min_score,
            bounds.limit,
            bounds.max_chars,
            self.ttl,
        )
        result: Loaded = self.backend.batch([op])[0]
        return result

    def search(
        self,
        scope: Scope,
        query: str,
        *,
        limit: int = 20,
        rules: AgentRules | None = None,
        origin: str | None = None,
    ) -> list[tuple[Memory, float]]:
        _readable(scope)
        readable = readable_scopes(scope, rules, origin=origin)
        words = tuple(fulltext.terms(query))
        op = SearchOp(readable, words, self.clock(), LoadBounds().min_score, _rows(limit), self.ttl)
        result: list[tuple[Memory, float]] = self.backend.batch([op])[0]
        return result

    def show(self, scope: Scope, *, all_statuses: bool = False, limit: int = 200) -> list[Memory]:
        statuses = None if all_statuses else (Status.ACTIVE,)
        op = ListOp(_readable(scope), statuses, _rows(limit))
        result: list[Memory] = self.backend.batch([op])[0]
        return result

    def pending_review(
        self, scope: Scope, *, limit: int = 200, whole_tenant: bool = False
    ) -> list[Memory]:
        """What waits for review, readable by `scope`; with `whole_tenant`, in every
        scope of its tenant (the operator's queue)."""
        op = ListOp(_readable(scope), (Status.PENDING_REVIEW,), _rows(limit), whole_tenant)
        result: list[Memory] = self.backend.batch([op])[0]
        return result

    def export(self, scope: Scope) -> Iterator[Memory]:
        """Every memory of exactly `scope` (not the layers above), all statuses."""
        _readable(scope)
        result: list[Memory] = self.backend.batch([ListOp((scope,), None, 10**9)])[0]
        yield from result

    def history(self, scope: Scope, key: str) -> list[Memory]:
        """Every version of `key` readable by `scope`: oldest first, each before its successor."""
        op = HistoryOp(_readable(scope), _text("key", key))
        result: list[Memory] = self.backend.batch([op])[0]
        return chain_order(result)

    def get(self, scope: Scope, ids: Sequence[str]) -> list[Memory]:
        op = GetOp(_readable(scope), tuple(_text("memory id", i) for i in ids))
        result: list[Memory] = self.backend.batch([op])[0]
        return result

    def receipt(self, handle: str) -> WriteReceipt | None:
        op = ReceiptOp(_text("receipt handle", handle))
        result: WriteReceipt | None = self.backend.batch([op])[0]
        return result

    def audit(
        self, tenant: str, memory_id: str = "", *, limit: int = 1000, newest: bool = False
    ) -> list[AuditEntry]:
        """The audit trail of `tenant` (of one memory, given its id), oldest first: its
        first `limit` entries, or with `newest` its last `limit`."""
        op = AuditOp(_text("tenant", tenant), _text("memory id", memory_id), _rows(limit), newest)
        result: list[AuditEntry] = self.backend.batch([op])[0]
        return result


def chain_order(versions: Sequence[Memory]) -> list[Memory]:
    """Every version after the one it supersedes, whatever the clocks said; otherwise
    by validity (`valid_from`, then `created_at`, then id). Two writers' clocks can
    disagree, so a successor may carry the earlier `valid_from`: the links decide."""
    by_id = {m.id: m for m in versions}
    successors: dict[str, list[Memory]] = {}
    ready = []
    for m in versions:
        if m.supersedes_id in by_id and m.supersedes_id != m.id:
            successors.setdefault(m.supersedes_id, []).append(m)
        else:
            ready.append(m)
    order: list[Memory] = []
    heap = [_when(m) for m in ready]  # each version enters once: it has one predecessor
    heapq.heapify(heap)
    while heap:
        *_, memory_id = heapq.heappop(heap)
        order.append(by_id[memory_id])
        for nxt in successors.get(memory_id, ()):
            heapq.heappush(heap, _when(nxt))
    # A cycle of links (never written by the store) would leave rows out: keep them.
    placed = {m.id for m in order}
    order += sorted((m for m in versions if m.id not in placed), key=_when)
    return order


def _when(m: Memory) -> tuple[datetime, datetime, str]:
    return (m.valid_from, m.created_at, m.id)


def open_store(url: str, *, clock: Clock = utcnow, ttl: TtlConfig = DEFAULT_TTL) -> Store:
    return Store(open_engine(url), clock=clock, ttl=ttl)


__all__ = ["Kind", "LoadBounds", "Store", "open_store"]
