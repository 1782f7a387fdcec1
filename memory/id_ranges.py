"""Passes over `ns_memories` a primary-key range at a time, each range its own transaction.

Expire and decay are set-based UPDATEs. Run over a million rows as one statement,
one would hold a transaction, and the row locks of everything it changed, for
seconds: a writer superseding one of those rows waits for all of it, and a pass
that dies loses all of it. Split into ranges of about `RANGE_ROWS` rows, each
range commits on its own, so a concurrent writer waits for one range at most and
a pass cut short keeps what it did (running it again does the rest: both passes
are idempotent).

The ranges are found as the pass goes (the id `size` rows past the last bound, an
index-only walk of the primary key), so they cover the whole key space, rows
inserted meanwhile included: the first range is open below, the last above.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import ColumnElement, Connection, Engine, and_, select, true

from memory.engine import retrying
from memory.tables import memories

RANGE_ROWS = 20_000

Work = Callable[[Connection, ColumnElement[bool]], int]
"""One range's part of a pass: given the range's condition, returns how many rows it did."""


def in_id_ranges(engine: Engine, work: Work, *, size: int = RANGE_ROWS) -> int:
    """Run `work` once per primary-key range of about `size` rows, each range in its own
    transaction (retried on transient errors); return the sum of what it returned."""
    if size < 1:
        raise ValueError(f"a range must hold at least one row, not {size}")
    total, low = 0, None
    while True:
        done, high = _one_range(engine, work, low, size)
        total += done
        if high is None:
            return total
        low = high


@retrying()
def _one_range(engine: Engine, work: Work, low: str | None, size: int) -> tuple[int, str | None]:
    """The range from `low`, in its own transaction (retried whole on a transient
    error); what `work` did there, and where the next range starts."""
    with engine.begin() as conn:
        high = _bound_after(conn, low, size)
        return work(conn, _between(low, high)), high


def _bound_after(conn: Connection, low: str | None, size: int) -> str | None:
    """The id `size` rows past `low` (from the first id if None); None past the end."""
    query = select(memories.c.id).order_by(memories.c.id).offset(size).limit(1)
    if low is not None:
        query = query.where(memories.c.id >= low)
    found: str | None = conn.execute(query).scalar()
    return found


def _between(low: str | None, high: str | None) -> ColumnElement[bool]:
    return and_(
        memories.c.id >= low if low is not None else true(),
        memories.c.id < high if high is not None else true(),
    )
