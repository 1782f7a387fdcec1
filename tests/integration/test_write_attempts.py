"""A write message's redeliveries are counted per handle, on both dialects."""

from __future__ import annotations

from sqlalchemy import Engine, select

from tests.clock import Clock
from workers import write_attempts
from workers.tables import write_attempts as table


def rows(engine: Engine) -> list[tuple[str, int]]:
    with engine.connect() as conn:
        query = select(table.c.handle, table.c.attempts).order_by(table.c.handle)
        return [(h, n) for h, n in conn.execute(query)]


def test_each_comeback_counts_per_handle_until_the_message_is_done(
    engine: Engine, clock: Clock
) -> None:
    assert [write_attempts.came_back(engine, "write:a", clock()) for _ in range(3)] == [1, 2, 3]
    assert write_attempts.came_back(engine, "write:b", clock()) == 1
    assert rows(engine) == [("write:a", 3), ("write:b", 1)]
    write_attempts.done(engine, "write:a")
    write_attempts.done(engine, "write:never-counted")  # a first delivery: nothing to forget
    assert rows(engine) == [("write:b", 1)]
    assert write_attempts.came_back(engine, "write:a", clock()) == 1  # sent again: counted anew
