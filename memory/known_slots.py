"""What the memory writer remembers of the slots it wrote: an apply without its lookup.

Before it judges a batch, an apply asks the database which rows hold its
idempotency keys and which row is active in each slot its keyed candidates name
(`memory.lookups`). On PostgreSQL that read is a round trip and a statement of its
own, about a tenth of an apply. Yet the writer of a shard is mostly the only one
writing its slots, and it knows what it left in each: the apply that wrote a slot
ends with the slot's active row (or none) in hand.

So a backend keeps those rows (`KnownSlots`), and an apply whose every slot is
known skips the read. The read it does make, for a scope it meets for the first
time, lists all of that scope's active slots (up to `lookups.LISTED_SLOTS`), so
that later applies know the slots no apply of this writer has written yet. An
apply without the read takes three things on trust, and its one write statement
checks each of them as it runs, failing whole when one no longer holds:

- each remembered active row is still active, at the same version, with the same
  content and source (`memory.pending`'s `unchanged`, read from the statement's
  snapshot; the supersession of such a row is part of the same statement);
- a slot remembered empty is still empty: a new active row there meets the
  one-active-value-per-slot index;
- no row holds a candidate's idempotency key yet: a new row meets the idempotency
  index (a retry delivered again under a new handle). The one-statement apply
  takes this on trust even when it reads: its lookup asks for the slots only.

A failed check raises a unique violation, like a concurrent writer's key would, and
`memory.sql` applies the batch again the ordinary way, with its lookup; the slots of
that batch are forgotten first. Nothing is stored from a remembered row that the
statement did not find unchanged, so what a batch decides is what it would have
decided from a fresh read made as the statement began.

Only PostgreSQL's one-statement apply uses it: SQLite answers the lookup in process,
and the ordinary apply (a transaction, after a conflict) reads as before.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping

from sqlalchemy import Connection

from memory.dialect import on_postgres
from memory.records import Memory, Scope

Slot = tuple[Scope, str]
"""A slot: a scope and a folded key (`memory.folding.folded_key`)."""

CAPACITY = 20_000
"""The most slots a backend remembers; past it, the least recently used go first.
A remembered row is a `Memory` (about a kilobyte with its content), so this holds
a writer's memory to some 20 MB."""

MAX_AGE_SECONDS = 600.0
"""How long a writer trusts what it learned of a slot before it reads the slot again."""

EXPECTED_DDL = (
    "CREATE OR REPLACE FUNCTION ns_rows_unchanged(unchanged boolean) RETURNS boolean"
    " LANGUAGE plpgsql AS $$ BEGIN IF NOT unchanged THEN RAISE unique_violation USING"
    " MESSAGE = 'a memory the writer remembered changed since it was written; the batch"
    " is applied again from a fresh read'; END IF; RETURN true; END $$",
)
"""The check's failure as an error (PostgreSQL only): true, or a unique violation
that undoes the whole statement. VOLATILE (the default), so it runs as the
statement does and is never folded away."""
EXPECTED_DROP = ("DROP FUNCTION IF EXISTS ns_rows_unchanged(boolean)",)


class KnownSlots:
    """The active row, or None for none, of each slot a backend's applies left behind;
    and the scopes it knows whole (a lookup listed every active slot of the scope, so a
    slot of it that is not remembered is empty).

    Bounded in number (`capacity`, least recently learned first out) and in age
    (`max_age` seconds): past it a slot is read again, and its row is dropped from
    memory, so what a forget removed from the store lingers in a writer's memory for
    that long at most. Safe to share between threads; each process has its own (a
    Celery worker's children each learn their own after the fork)."""

    def __init__(
        self,
        capacity: int = CAPACITY,
        max_age: float = MAX_AGE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.capacity, self.max_age, self.clock = capacity, max_age, clock
        # Each in the order learned (a slot learned again moves to the end), with when.
        self._rows: dict[Slot, tuple[float, Memory | None]] = {}
        self._whole: dict[Scope, float] = {}  # scopes whose every active slot is in _rows
        self._crowded: dict[Scope, float] = {}  # too many active slots to list
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    def recall(self, slots: Iterable[Slot]) -> dict[Slot, Memory | None] | None:
        """What each of `slots` holds, or None unless every one of them is known."""
        with self._lock:
            self._drop_old()
            known = {}
            for slot in slots:
                if (learned := self._rows.get(slot)) is not None:
                    known[slot] = learned[1]
                elif slot[0] in self._whole:
                    known[slot] = None
                else:
                    return None
            return known

    def to_list(self, slots: Iterable[Slot]) -> list[Scope]:
        """The scopes of `slots` worth listing whole: neither known whole nor crowded."""
        with self._lock:
            self._drop_old()
            scopes = dict.fromkeys(scope for scope, _ in slots)
            return [s for s in scopes if s not in self._whole and s not in self._crowded]

    def learn(
        self,
        slots: Mapping[Slot, Memory | None],
        listed: Mapping[Scope, Mapping[Slot, Memory] | None] | None = None,
    ) -> None:
        """Remember what `slots` hold after an apply that committed, over what its lookup
        `listed` of whole scopes before it (None for a scope too crowded to list)."""
        now = self.clock()
        with self._lock:
            for scope, listing in (listed or {}).items():
                if listing is None:
                    _learned(self._crowded, scope, now, self.capacity)
                    continue
                for slot, row in listing.items():
                    self._remember(slot, row, now)
                _learned(self._whole, scope, now, self.capacity)
            for slot, held in slots.items():
                self._remember(slot, held, now)

    def _remember(self, slot: Slot, row: Memory | None, now: float) -> None:
        self._rows.pop(slot, None)  # re-inserted last: the most recently learned
        self._rows[slot] = (now, row)
        while len(self._rows) > self.capacity:
            evicted = next(iter(self._rows))
            del self._rows[evicted]
            self._whole.pop(evicted[0], None)  # no longer known whole

    def _drop_old(self) -> None:
        """Drop what was learned more than `max_age` ago (the oldest come first)."""
        oldest = self.clock() - self.max_age
        rows = self._rows
        while rows and next(iter(rows.values()))[0] < oldest:
            del rows[next(iter(rows))]
        for scopes in (self._whole, self._crowded):
            while scopes and next(iter(scopes.values())) < oldest:
                del scopes[next(iter(scopes))]

    def forget(self, slots: Iterable[Slot]) -> None:
        with self._lock:
            for slot in slots:
                self._rows.pop(slot, None)
                self._whole.pop(slot[0], None)

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()
            self._whole.clear()
            self._crowded.clear()


def _learned(scopes: dict[Scope, float], scope: Scope, now: float, capacity: int) -> None:
    scopes.pop(scope, None)
    scopes[scope] = now
    while len(scopes) > capacity:
        del scopes[next(iter(scopes))]


def create(conn: Connection) -> None:
    """PostgreSQL only: create `ns_rows_unchanged` (SQLite never skips its lookup)."""
    on_postgres(conn, EXPECTED_DDL)


def drop(conn: Connection) -> None:
    on_postgres(conn, EXPECTED_DROP)
