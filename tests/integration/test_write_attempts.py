"""A write message's redeliveries are counted per handle, on both dialects."""

from __future__ import annotations

from datetime import timedelta

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


def test_a_given_up_message_is_kept_and_listed_until_it_ages_out(
    engine: Engine, clock: Clock
) -> None:
    start = clock()
    for _ in range(3):
        write_attempts.came_back(engine, "write:poison", clock())
    write_attempts.came_back(engine, "write:vanished", clock())  # never finishes
    clock.advance(seconds=5)
    write_attempts.gave_up(engine, "write:poison", clock())
    [given] = write_attempts.given_up_since(engine, start)
    assert (given.handle, given.attempts, given.at) == ("write:poison", 3, clock())
    assert write_attempts.given_up_since(engine, clock() + timedelta(seconds=1)) == []
    # A month on, the next redelivery counted drops both stale rows.
    clock.advance(seconds=write_attempts.KEEP.total_seconds() + 1)
    assert write_attempts.came_back(engine, "write:new", clock()) == 1
    assert rows(engine) == [("write:new", 1)]
