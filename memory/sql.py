"""The SQL backend: one SQLAlchemy Core implementation for PostgreSQL and SQLite.

A batch is one transaction: `BEGIN IMMEDIATE` on SQLite (see `memory.engine`),
read committed on PostgreSQL with the unique idempotency key, the unique active
value per slot and the version check in `UPDATE … WHERE version = :expected`
closing the races. Transient errors retry the whole batch; a concurrent writer
that stored the same handle, key or slot first makes the batch replay, and the
replay finds its rows; replays of one slot take turns (`memory.slot_locks`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, exc

from memory import lookups, queries, ranking_queries
from memory.engine import ROUND_TRIP, autocommit, retrying
from memory.known_slots import KnownSlots, Slot
from memory.loading import Ranked
from memory.meanwhile import Meanwhile, worth_a_thread
from memory.pending import PendingWrites
from memory.port import (
    WRITE_OPS,
    ApplyOp,
    AuditEntry,
    AuditOp,
    HistoryOp,
    ListOp,
    MemoryBackend,
    Op,
    PoolOp,
    SearchOp,
)
from memory.receipts import WriteReceipt
from memory.records import Memory, Scope
from memory.slot_locks import slots_of, take_slot_turns
from memory.tables import metadata
from memory.unit import Existing, perform
from memory.write_audit import WriteAudit

REPLAYS = 8
"""How many times a batch is applied the ordinary way before a unique key it keeps
meeting is raised. Each replay reads what the writers that beat it stored. Racing
alone, one writer commits in every round but the same one may lose every round while
the others keep writing (eight PostgreSQL processes putting one LangGraph key lost
13 of 320 puts so), so a replay first waits its turn at its slots."""


class SqlBackend(MemoryBackend):
    """Memory in the `ns_memories` tables of one engine.

    On PostgreSQL it remembers what its applies left in each slot (`known_slots`), so
    that an apply whose slots it all knows is one round trip: its write statement."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.known = KnownSlots()

    def create_schema(self) -> None:
        metadata.create_all(self.engine)

    def batch(self, ops: Sequence[Op]) -> list[Any]:
        if not any(isinstance(op, WRITE_OPS) for op in ops):
            return self._read(ops)
        conflicted = False  # from then on, queue for the slots before reading
        if (
            len(ops) == 1
            and isinstance(ops[0], ApplyOp)
            and self.engine.dialect.name == "postgresql"
        ):
            try:
                return self._apply_in_one_statement(ops)
            except exc.IntegrityError:
                # Its handle was applied before (the receipt's primary key), a
                # concurrent writer stored one of its keys first, or a slot changed
                # since this backend last saw it: nothing of the statement landed.
                # The ordinary way reads the receipt and the slots first.
                self.known.forget(slots_of(ops))
                conflicted = True
        elif not all(isinstance(op, ApplyOp) for op in ops if isinstance(op, WRITE_OPS)):
            self.known.clear()  # an edit or a review changes rows behind the applies
        for _ in range(REPLAYS - 1):
            try:
                return self._write(ops, take_turns=conflicted)
            except exc.IntegrityError:
                conflicted = True  # another writer got there first: read again, apply again
        return self._write(ops, take_turns=True)

    @retrying()
    def _read(self, ops: Sequence[Op]) -> list[Any]:
        with autocommit(self.engine) as conn:  # reads need no transaction
            rows = SqlRows(conn)
            return [perform(rows, op) for op in ops]

    @retrying()
    def _apply_in_one_statement(self, ops: Sequence[Op]) -> list[Any]:
        """One apply on PostgreSQL: its reads, then all its writes as one statement
        (`memory.pending`), on an autocommit connection. The statement is atomic and
        commits as it ends, so the apply stays all-or-nothing without BEGIN and COMMIT
        round trips; the reads come before every write, in read committed as before.

        It does not ask whether its handle was applied before: the receipt's primary
        key answers that as the statement runs. A replay fails the statement, which
        leaves nothing behind, and `batch` applies it again the ordinary way, which
        finds the stored receipt. A replay is rare (a redelivered message); a first
        apply, the common case, saves the read."""
        with autocommit(self.engine) as conn:
            rows = SqlRows(conn, queue_updates=True, receipt_by_key=True, known=self.known)
            results = [perform(rows, op) for op in ops]
            rows.flush()
        self.known.learn(rows.settled_slots, rows.listed)  # committed as the statement ended
        return results

    @retrying()
    def _write(self, ops: Sequence[Op], *, take_turns: bool = False) -> list[Any]:
        """The ordinary apply, in one transaction; a replay (`take_turns`) first queues
        behind the other replaying writers of its slots (`memory.slot_locks`)."""
        with self.engine.begin() as conn:
            if take_turns:
                take_slot_turns(conn, ops)
            rows = SqlRows(conn)
            results = [perform(rows, op) for op in ops]
            rows.flush()
        if self.engine.dialect.name == "postgresql":  # the only dialect that recalls
            self.known.learn(rows.settled_slots)  # committed
        return results


class SqlRows:
    """`memory.unit.RowAccess` over one open connection, by way of `memory.queries`.

    Inserts, supersessions, audit entries and receipts are queued
    (`memory.pending`) and sent together before the next read, the next direct
    update, or the commit (`flush`): an apply's writes cost one round trip.
    """

    def __init__(
        self,
        conn: Connection,
        *,
        queue_updates: bool = False,
        receipt_by_key: bool = False,
        known: KnownSlots | None = None,
    ) -> None:
        self.conn = conn
        self.pending = PendingWrites()
        # Queue direct updates too (an apply's only kind): they then travel with the
        # other writes in one statement. Only where nothing reads an update's result.
        self.queue_updates = queue_updates
        # Leave "was this handle applied?" to the receipt's primary key (see
        # `SqlBackend._apply_in_one_statement`).
        self.receipt_by_key = receipt_by_key
        # Answer an apply's lookup from what earlier applies left in its slots, when
        # they know them all (`memory.known_slots`); the statement checks it.
        self.known = known
        self.settled_slots: dict[Slot, Memory | None] = {}
        self.listed: dict[Scope, dict[Slot, Memory] | None] = {}  # whole scopes a lookup read
        # The rows of the last load's pools, whole: a load's `by_ids` of its
        # winners is answered from them (see `ranking_queries.load_pools`).
        self.pooled: tuple[tuple[Scope, ...], dict[str, Any]] = ((), {})

    def flush(self) -> None:
        """Send the queued writes; the transaction's owner calls it before committing."""
        self.pending.flush(self.conn)

    def _before_read(self) -> None:
        """Send the queued writes so a read sees them; in one-statement mode a read
        after a write would commit the writes alone, so it is refused instead."""
        if self.queue_updates and self.pending:
            raise RuntimeError("a read after the apply's writes would split its one statement")
        self.flush()

    def active_by_key(self, scope: Scope, key: str) -> Memory | None:
        self._before_read()
        return queries.active_by_key(self.conn, scope, key)

    def ask_existing(
        self, idempotency: Sequence[tuple[Scope, str]], slots: Sequence[tuple[Scope, str]]
    ) -> Callable[[], Existing]:
        """Recalled when every slot is known (`memory.known_slots`): no idempotency key
        is taken as held, and the write statement checks all it took on trust.
        Otherwise read: on PostgreSQL across a network in a thread (`memory.meanwhile`)
        while the caller goes on; a server close by (and SQLite) answers at once.
        The one-statement apply reads only the slots: there too no idempotency key is
        taken as held, and the statement's idempotency index checks it (a key held
        after all fails the statement, and the ordinary apply reads it)."""
        if self.known is not None and (recalled := self.known.recall(slots)) is not None:
            active = {slot: row for slot, row in recalled.items() if row is not None}
            self.pending.expected.extend(active.values())  # the statement checks them
            return lambda: ({}, active)
        self._before_read()
        known = self.known

        def read() -> Existing:
            if known is None:
                return queries.existing(self.conn, idempotency, slots)
            listed = known.to_list(slots)  # a scope met for the first time is read whole
            _, active, self.listed = lookups.existing(self.conn, (), slots, listed)
            return {}, active

        if worth_a_thread(self.conn.connection.info.get(ROUND_TRIP)):
            return Meanwhile(read)
        found = read()
        return lambda: found

    def settled(self, slots: Mapping[Slot, Memory | None]) -> None:
        self.settled_slots.update(slots)

    def insert_many(self, memories: Sequence[Memory]) -> None:
        self.pending.memories.extend(memories)

    def supersede_many(self, successors: Mapping[str, str], now: datetime) -> None:
        self.pending.successors.extend((old, new, now) for old, new in successors.items())

    def update(
        self, memory_id: str, changes: Mapping[str, Any], *, expected_version: int | None = None
    ) -> bool:
        if self.queue_updates:
            if expected_version is None and self.pending.queue_update(memory_id, changes):
                return True
            # Run alone it would commit alone: never split an apply's writes.
            raise RuntimeError(f"update of {memory_id} cannot join the apply's one statement")
        self.flush()
        return queries.update_memory(
            self.conn, memory_id, changes, expected_version=expected_version
        )

    def record_audit(self, entries: Sequence[AuditEntry]) -> None:
        self.pending.audit.extend(entries)

    def save_receipt(self, receipt: WriteReceipt, audit: WriteAudit) -> None:
        self.pending.receipts.append(receipt)
        self.pending.audit.extend(audit.rows(receipt))

    def get_receipt(self, handle: str) -> WriteReceipt | None:
        if self.receipt_by_key:
            return None
        self._before_read()
        return queries.get_receipt(self.conn, handle)

    def pool(self, op: PoolOp) -> list[tuple[Ranked, float]]:
        self._before_read()
        return ranking_queries.ranking_pool(
            self.conn,
            op.readable,
            op.words,
            op.now,
            min_score=op.min_score,
            kinds=op.kinds,
            pool=op.limit,
            ttl=op.ttl,
        )

    def pools(
        self, hot: PoolOp, cold: PoolOp
    ) -> tuple[list[tuple[Ranked, float]], list[tuple[Ranked, float]]]:
        self._before_read()
        hot_pool, cold_pool, rows = ranking_queries.load_pools(
            self.conn,
            hot.readable,
            hot.words,
            hot.now,
            min_score=hot.min_score,
            hot=(hot.kinds, hot.limit),
            cold=(cold.kinds, cold.limit),
            ttl=hot.ttl,
        )
        self.pooled = (tuple(hot.readable), rows)
        return hot_pool, cold_pool

    def search(self, op: SearchOp) -> list[tuple[Memory, float]]:
        self._before_read()
        return queries.search(
            self.conn,
            op.readable,
            op.words,
            op.now,
            limit=op.limit,
            min_score=op.min_score,
            ttl=op.ttl,
        )

    def listing(self, op: ListOp) -> list[Memory]:
        self._before_read()
        return queries.listing(
            self.conn,
            op.readable,
            statuses=op.statuses,
            limit=op.limit,
            whole_tenant=op.whole_tenant,
        )

    def history(self, op: HistoryOp) -> list[Memory]:
        self._before_read()
        return queries.history(self.conn, op.readable, op.key)

    def by_ids(self, readable: Sequence[Scope], ids: Sequence[str]) -> list[Memory]:
        pooled_for, rows = self.pooled
        if ids and tuple(readable) == pooled_for and all(i in rows for i in ids):
            # The winners of this unit's load: already read, by the same reader.
            return [ranking_queries.memory_from_pool_row(rows[i]) for i in dict.fromkeys(ids)]
        self._before_read()
        return queries.by_ids(self.conn, readable, ids)

    def audit_trail(self, op: AuditOp) -> list[AuditEntry]:
        self._before_read()
        return queries.audit_trail(self.conn, op.tenant, op.memory_id, op.limit, op.newest)
