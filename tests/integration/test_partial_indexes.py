"""The load and the slot lookups can use the partial indexes (0008, 0010) on both dialects.

A partial index serves a statement only when the statement carries the index's
own predicate as written: a bound parameter in its place (`status = ?`) does not
match on SQLite, nor in a PostgreSQL prepared statement's generic plan. These
tests EXPLAIN the statements the store really sends, with PostgreSQL's generic
plan forced and sequential scans off, so a predicate that stops matching shows
up as another index in the plan.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from memory.records import Candidate, Source
from memory.store import Store
from tests.clock import Clock
from tests.integration.sql_watch import Plans
from tests.integration.test_maintenance_support import ANA, candidate

pytestmark = pytest.mark.integration


def fact(content: str, key: str = "", run: str = "t1") -> Candidate:
    return candidate(content, key=key, source=Source.STATED, run=run)


@pytest.fixture
def filled(store: Store) -> Iterator[Store]:
    store.apply(
        [fact("ana prefers mornings"), fact("ana lives in Lisbon", key="home")],
        handle="h1",
        actor="ana",
    )
    yield store


def test_a_load_reads_the_active_rows_index(filled: Store) -> None:
    with Plans() as plans:
        loaded = filled.load(ANA, goal="plan the week", trigger="Lisbon mornings")
    assert len(loaded) == 2
    assert plans.using("ix_ns_memories_loadable"), plans.plans


def test_a_slot_lookup_reads_the_active_slots_index(
    filled: Store, engine: Engine, clock: Clock
) -> None:
    # A writer that has not seen the slot reads it (`memory.known_slots`).
    writer = Store(engine, clock=clock)
    with Plans() as plans:
        writer.apply([fact("ana lives in Porto", "home", run="t2")], handle="h2", actor="ana")
    assert plans.using("uq_ns_memories_active_slot"), plans.plans
    assert [m.content for m in filled.history(ANA, "home")] == [
        "ana lives in Lisbon",
        "ana lives in Porto",
    ]
