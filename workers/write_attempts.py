"""How often a write message came back unfinished: a poison batch is given up.

The write task is acknowledged late and rejected when its worker is lost, so a
batch whose writer died (SIGKILL, out of memory, a fault in native code) comes
back, on every broker. A batch that takes its writer down *each* time would come
back for ever, and the writes queued behind it on its queue would wait for ever.

Only a redelivered message is counted (the broker marks it: kombu's Redis
transport, RabbitMQ, and `workers.embedded_broker`), so a first delivery, the
common case, costs no write; a redelivery means at least one earlier delivery did
not finish. The row goes when the message is applied. A given-up message's row
stays, marked (`gave_up`), so that `nightshift status` and the metrics can show
it (`given_up_since`) until an operator acknowledges it (`acknowledge`); rows
untouched for `KEEP` are dropped as the next redelivery is counted, given up or
not (a message that vanished from a purged queue never finishes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, Engine, delete, insert, select, update

from memory.engine import retrying
from workers.tables import write_attempts

KEEP = timedelta(days=30)
"""How long a row nobody counts any more is kept."""


@dataclass(frozen=True, slots=True)
class GivenUp:
    handle: str
    attempts: int
    at: datetime
    acknowledged_at: datetime | None = None
    acknowledged_by: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "handle": self.handle,
            "attempts": self.attempts,
            "given_up_at": self.at.isoformat(),
            "acknowledged_at": self.acknowledged_at and self.acknowledged_at.isoformat(),
            "acknowledged_by": self.acknowledged_by,
        }


@retrying()
def came_back(engine: Engine, handle: str, now: datetime) -> int:
    """Count a redelivery of the message with receipt `handle`; return how many so far."""
    with engine.begin() as conn:
        conn.execute(delete(write_attempts).where(write_attempts.c.last_at < now - KEEP))
        seen = conn.execute(
            update(write_attempts)
            .where(write_attempts.c.handle == handle)
            .values(attempts=write_attempts.c.attempts + 1, last_at=now)
            .returning(write_attempts.c.attempts)
        ).scalar()
        if seen is not None:
            return int(seen)
        conn.execute(
            insert(write_attempts).values(handle=handle, attempts=1, first_at=now, last_at=now)
        )
        return 1


@retrying()
def done(engine: Engine, handle: str) -> None:
    """Forget the count of the message with receipt `handle`: it is applied."""
    with engine.begin() as conn:
        conn.execute(delete(write_attempts).where(write_attempts.c.handle == handle))


@retrying()
def gave_up(engine: Engine, handle: str, now: datetime) -> None:
    """Mark the message with receipt `handle` given up (its row is kept for `KEEP`)."""
    with engine.begin() as conn:
        conn.execute(
            update(write_attempts)
            .where(write_attempts.c.handle == handle)
            .values(given_up_at=now, last_at=now)
        )


def given_up_since(engine: Engine, since: datetime) -> list[GivenUp]:
    """The messages given up at or after `since` that nobody acknowledged, the newest
    first."""
    t = write_attempts
    return _given_up(engine, t.c.given_up_at >= since, t.c.acknowledged_at.is_(None))


def given_up(engine: Engine) -> list[GivenUp]:
    """Every given-up message still on record (for `KEEP`), acknowledged or not, the
    newest first."""
    return _given_up(engine, write_attempts.c.given_up_at.is_not(None))


def _given_up(engine: Engine, *where: ColumnElement[bool]) -> list[GivenUp]:
    t = write_attempts
    query = (
        select(t.c.handle, t.c.attempts, t.c.given_up_at, t.c.acknowledged_at, t.c.acknowledged_by)
        .where(*where)
        .order_by(t.c.given_up_at.desc(), t.c.handle)
    )
    with engine.connect() as conn:
        return [GivenUp(*row) for row in conn.execute(query)]


@retrying()
def acknowledge(engine: Engine, handles: Sequence[str] | None, by: str, now: datetime) -> list[str]:
    """Mark given-up messages acknowledged by `by`: those of `handles`, or every one
    not yet acknowledged (None). Returns the handles marked now; one acknowledged
    before keeps who and when it first was."""
    t = write_attempts
    where = [t.c.given_up_at.is_not(None), t.c.acknowledged_at.is_(None)]
    if handles is not None:
        where.append(t.c.handle.in_(handles))
    with engine.begin() as conn:
        marked = conn.execute(
            update(t)
            .where(*where)
            .values(acknowledged_at=now, acknowledged_by=by)
            .returning(t.c.handle)
        )
        return sorted(marked.scalars())
