"""The store: the one object through which memory is written, loaded and read.

    store = open_store("sqlite:///memory.db")
    store.create_schema()                       # or `nightshift db upgrade`
    receipt = store.apply([candidate], handle="run-1:write", actor="writer")
    loaded = store.load(Scope("acme", "ana", "triage"), goal="renewals", trigger="")

`apply` is what the memory writer calls; everything else is a read, and every
read is confined to the reader's scope and the layers above it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine, exc

from memory import fulltext, queries
from memory.engine import open_engine, retrying
from memory.loading import COLD_KINDS, HOT_KINDS, Loaded, bound, rank
from memory.policy import Action, AgentRules, judge
from memory.receipts import Decision, Outcome, WriteReceipt
from memory.records import Candidate, Kind, Memory, Scope, Source, Status, content_hash
from memory.tables import metadata

Clock = Callable[[], datetime]
RulesFor = Callable[[str], AgentRules]

TRUSTED_SOURCES = frozenset({Source.STATED, Source.OPERATOR})


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class LoadBounds:
    limit: int = 20
    max_chars: int = 8000
    min_score: float = 0.25


class Store:
    """Memory over one SQLAlchemy engine (PostgreSQL or SQLite)."""

    def __init__(self, engine: Engine, *, clock: Clock = utcnow) -> None:
        self.engine = engine
        self.clock = clock

    def create_schema(self) -> None:
        """Create the tables directly (tests, embedded use). Production uses Alembic."""
        metadata.create_all(self.engine)

    # -- writing -------------------------------------------------------------

    def apply(
        self,
        candidates: Sequence[Candidate],
        *,
        handle: str,
        actor: str,
        rules_for: RulesFor = lambda agent: AgentRules.default(),
    ) -> WriteReceipt:
        """Judge and apply `candidates` in one transaction; return the receipt.

        Idempotent twice over: a receipt handle seen before returns the stored
        receipt untouched, and each candidate's idempotency key admits one row.
        """
        try:
            return self._apply(candidates, handle=handle, actor=actor, rules_for=rules_for)
        except exc.IntegrityError:
            # A concurrent writer stored the same handle or key first; replaying
            # now finds its rows and reports duplicates instead of adding copies.
            return self._apply(candidates, handle=handle, actor=actor, rules_for=rules_for)

    @retrying()
    def _apply(
        self, candidates: Sequence[Candidate], *, handle: str, actor: str, rules_for: RulesFor
    ) -> WriteReceipt:
        now = self.clock()
        with self.engine.begin() as conn:
            earlier = queries.get_receipt(conn, handle)
            if earlier is not None:
                return earlier
            decisions = tuple(
                _apply_one(conn, i, c, rules_for(c.provenance.agent), now)
                for i, c in enumerate(candidates)
            )
            tenant = candidates[0].scope.tenant if candidates else ""
            run_id = candidates[0].provenance.run_id if candidates else ""
            receipt = WriteReceipt(handle, tenant, run_id, now, decisions)
            queries.save_receipt(conn, receipt)
            queries.record_audit(
                conn,
                (_audit_entry(d, handle) for d in decisions),
                actor=actor,
                tenant=tenant,
                now=now,
            )
        return receipt

    # -- reading -------------------------------------------------------------

    def load(
        self,
        scope: Scope,
        *,
        goal: str = "",
        trigger: str = "",
        bounds: LoadBounds = LoadBounds(),
    ) -> Loaded:
        """What a run of `scope` is given at its start: hot first, then ranked, bounded."""
        now = self.clock()
        words = fulltext.terms(f"{goal} {trigger}")
        with self.engine.connect() as conn:
            hot_pool = queries.ranking_pool(
                conn,
                scope,
                words,
                now,
                min_score=bounds.min_score,
                kinds=HOT_KINDS,
                pool=bounds.limit,
            )
            cold_pool = queries.ranking_pool(
                conn,
                scope,
                words,
                now,
                min_score=bounds.min_score,
                kinds=COLD_KINDS,
                pool=bounds.limit * 5,
            )
        hot = bound(rank(hot_pool, now), bounds.limit, bounds.max_chars // 2)
        left_chars = bounds.max_chars - sum(len(m.content) for m in hot)
        ranked = bound(rank(cold_pool, now), bounds.limit - len(hot), left_chars)
        return Loaded(tuple(hot), tuple(ranked))

    def search(self, scope: Scope, query: str, *, limit: int = 20) -> list[tuple[Memory, float]]:
        with self.engine.connect() as conn:
            return queries.search(
                conn,
                scope,
                fulltext.terms(query),
                self.clock(),
                limit=limit,
                min_score=LoadBounds().min_score,
            )

    def show(self, scope: Scope, *, all_statuses: bool = False, limit: int = 200) -> list[Memory]:
        statuses = None if all_statuses else [Status.ACTIVE]
        with self.engine.connect() as conn:
            return queries.listing(conn, scope, statuses=statuses, limit=limit)

    def history(self, scope: Scope, key: str) -> list[Memory]:
        with self.engine.connect() as conn:
            return queries.history(conn, scope, key)

    def get(self, scope: Scope, ids: Sequence[str]) -> list[Memory]:
        with self.engine.connect() as conn:
            return queries.by_ids(conn, scope, ids)

    def receipt(self, handle: str) -> WriteReceipt | None:
        with self.engine.connect() as conn:
            return queries.get_receipt(conn, handle)


def open_store(url: str, *, clock: Clock = utcnow) -> Store:
    return Store(open_engine(url), clock=clock)


def _apply_one(
    conn: Connection, index: int, candidate: Candidate, rules: AgentRules, now: datetime
) -> Decision:
    verdict = judge(candidate, rules)
    if verdict.action is Action.REFUSE:
        return Decision(index, Outcome.REFUSED, verdict.kind.value, verdict.rule, verdict.reason)
    kind = verdict.kind
    status = Status.ACTIVE if verdict.action is Action.ACCEPT else Status.PENDING_REVIEW
    rule, reason = verdict.rule, verdict.reason

    earlier = queries.by_idempotency_key(
        conn, candidate.scope, candidate.effective_idempotency_key()
    )
    if earlier is not None:
        if earlier["content_hash"] == content_hash(candidate.content) and earlier["kind"] == kind:
            return Decision(
                index,
                Outcome.DUPLICATE,
                kind.value,
                "idempotent",
                "the same write was applied before",
                earlier["id"],
            )
        queries.replace_content(conn, earlier["id"], candidate, kind)
        return Decision(
            index,
            Outcome.REPLACED,
            kind.value,
            "idempotent",
            "a retry of an earlier write replaced it",
            earlier["id"],
        )

    current = None
    if status is Status.ACTIVE and candidate.key:
        current = queries.active_by_key(conn, candidate.scope, candidate.key)
        if current is not None and current["content_hash"] == content_hash(candidate.content):
            return Decision(
                index,
                Outcome.DUPLICATE,
                kind.value,
                "same-value",
                f"key {candidate.key!r} already holds this value",
                current["id"],
            )
        if (
            current is not None
            and Source(current["source"]) in TRUSTED_SOURCES
            and candidate.provenance.source not in TRUSTED_SOURCES
        ):
            status, current = Status.PENDING_REVIEW, None
            rule = "stated-beats-inferred"
            reason = (
                f"key {candidate.key!r} holds the person's own statement; "
                "an agent's value waits for review"
            )

    memory_id = queries.insert_memory(
        conn, candidate, kind, status, now, supersedes_id=current["id"] if current else None
    )
    if current is not None:
        queries.mark_superseded(conn, current["id"], memory_id, now)
        return Decision(
            index, Outcome.SUPERSEDED, kind.value, rule, reason, memory_id, current["id"]
        )
    outcome = Outcome.STORED if status is Status.ACTIVE else Outcome.REVIEW
    return Decision(index, outcome, kind.value, rule, reason, memory_id)


def _audit_entry(decision: Decision, handle: str) -> dict[str, object]:
    return {
        "action": f"write.{decision.outcome.value}",
        "memory_id": decision.memory_id,
        "detail": {
            "handle": handle,
            "index": decision.index,
            "rule": decision.rule,
            "kind": decision.kind,
            "superseded": decision.superseded_id,
        },
    }


__all__ = ["Kind", "LoadBounds", "Store", "open_store"]
