"""How often a write message came back unfinished: a poison batch is given up.

The write task is acknowledged late and rejected when its worker is lost, so a
batch whose writer died (SIGKILL, out of memory, a fault in native code) comes
back, on every broker. A batch that takes its writer down *each* time would come
back for ever, and the writes queued behind it on its queue would wait for ever.

Only a redelivered message is counted (the broker marks it: kombu's Redis
transport, RabbitMQ, and `workers.embedded_broker`), so a first delivery, the
common case, costs no write; a redelivery means at least one earlier delivery did
not finish. The row goes when the message is done, applied or given up.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Engine, delete, insert, update

from memory.engine import retrying
from workers.tables import write_attempts


@retrying()
def came_back(engine: Engine, handle: str, now: datetime) -> int:
    """Count a redelivery of the message with receipt `handle`; return how many so far."""
    with engine.begin() as conn:
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
    """Forget the count of the message with receipt `handle`: it is applied or given up."""
    with engine.begin() as conn:
        conn.execute(delete(write_attempts).where(write_attempts.c.handle == handle))
