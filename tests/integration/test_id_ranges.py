"""Expire and decay a primary-key range at a time: every row is reached once, each range
commits on its own, rows written during the pass are covered."""

from __future__ import annotations

import pytest
from sqlalchemy import ColumnElement, Connection, func, select
from sqlalchemy.exc import OperationalError

from memory import expiry, reinforcement
from memory.id_ranges import in_id_ranges
from memory.records import Status
from memory.reinforcement import Direction, Vote
from memory.store import Store
from memory.tables import memories
from memory.vote_rights import VoteRights
from tests.clock import Clock
from tests.integration.test_maintenance_support import ANA, candidate, insert_active
from workers.maintenance import run_job

pytestmark = pytest.mark.integration


def write(store: Store, count: int, run: str) -> None:
    store.apply(
        [candidate(f"fact {n} of {run} about disks", run=run) for n in range(count)],
        handle=run,
        actor="w",
    )


def statuses(store: Store) -> dict[str, int]:
    with store.engine.connect() as conn:
        query = select(memories.c.status, func.count()).group_by(memories.c.status)
        return dict(conn.execute(query).all())  # type: ignore[arg-type]


def test_ranges_cover_every_row_once(store: Store) -> None:
    write(store, 23, "r1")
    seen: list[str] = []

    def ids_in(conn: Connection, among: ColumnElement[bool]) -> int:
        found = list(conn.execute(select(memories.c.id).where(among)).scalars())
        seen.extend(found)
        return len(found)

    assert in_id_ranges(store.engine, ids_in, size=5) == 23
    assert len(seen) == len(set(seen)) == 23
    assert in_id_ranges(store.engine, ids_in, size=100) == 23


def test_expire_by_ranges_matches_one_pass_and_commits_range_by_range(
    store: Store, clock: Clock
) -> None:
    write(store, 12, "old")
    clock.advance(days=91)
    write(store, 5, "new")
    calls: list[int] = []

    def expire_then_fail(conn: Connection, among: ColumnElement[bool]) -> int:
        if len(calls) == 2:
            raise RuntimeError("the worker died in the third range")
        calls.append(expiry.expire(conn, clock(), among=among))
        return calls[-1]

    with pytest.raises(RuntimeError):
        in_id_ranges(store.engine, expire_then_fail, size=4)
    # The first two ranges stayed expired; the third rolled back.
    assert statuses(store)[Status.EXPIRED.value] == sum(calls) > 0

    summary = run_job(store.engine, "expire", now=clock())  # picks up the rest
    assert summary.counts["expired"] == 12 - sum(calls)
    assert statuses(store) == {Status.EXPIRED.value: 12, Status.ACTIVE.value: 5}


def test_a_transient_error_retries_its_range_alone(store: Store, clock: Clock) -> None:
    write(store, 12, "old")
    clock.advance(days=91)
    attempts: list[int] = []

    def expire_with_one_deadlock(conn: Connection, among: ColumnElement[bool]) -> int:
        attempts.append(len(attempts))
        done = expiry.expire(conn, clock(), among=among)
        if len(attempts) == 2:  # the second range's first try: rolled back, tried again
            raise OperationalError("UPDATE …", {}, Exception("deadlock detected"))
        return done

    assert in_id_ranges(store.engine, expire_with_one_deadlock, size=4) == 12
    assert len(attempts) == 4  # three ranges of 4 rows, and the second one again
    assert statuses(store) == {Status.EXPIRED.value: 12}


def test_a_row_written_during_the_pass_is_in_a_range(store: Store, clock: Clock) -> None:
    write(store, 6, "r1")
    late: list[str] = []

    def count_and_write(conn: Connection, among: ColumnElement[bool]) -> int:
        if not late:  # a row written after the pass began (a random, version 4 id)
            late.append(insert_active(conn, "written mid-pass", key="", now=clock()))
        return len(list(conn.execute(select(memories.c.id).where(among)).scalars()))

    assert in_id_ranges(store.engine, count_and_write, size=2) == 7


def test_a_range_needs_a_row(store: Store) -> None:
    with pytest.raises(ValueError, match="at least one row"):
        in_id_ranges(store.engine, lambda conn, among: 0, size=0)


def test_decay_job_goes_by_ranges(store: Store, clock: Clock) -> None:
    write(store, 30, "r1")
    with store.engine.connect() as conn:
        ids = list(conn.execute(select(memories.c.id)).scalars())
    with store.engine.begin() as conn:
        down = [Vote(i, Direction.DOWN, "run:a") for i in ids[::3]]
        operator = {"": VoteRights.of_operator(ANA.tenant)}
        reinforcement.apply_votes(conn, down, clock(), rights=operator, handle="votes")
    clock.advance(days=100)  # a down-voted 0.5 halves in 90 days: under the 0.25 bar
    assert run_job(store.engine, "decay", now=clock(), dry_run=True).counts["decayed"] == 10
    assert run_job(store.engine, "decay", now=clock()).counts["decayed"] == 10
    assert run_job(store.engine, "decay", now=clock()).counts["decayed"] == 0
