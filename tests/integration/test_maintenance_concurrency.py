"""PostgreSQL: writes that land while consolidation runs are all present afterwards."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import func, select

from memory import consolidation
from memory.engine import open_engine
from memory.records import Kind, Scope, Status
from memory.store import Store
from memory.tables import memories
from tests.clock import Clock
from tests.integration.test_maintenance_support import candidate
from tests.services import postgres_database
from workers import schema

pytestmark = pytest.mark.integration

WRITES = 120


@pytest.fixture
def store() -> Iterator[Store]:
    with postgres_database() as url:
        engine = open_engine(url, pool_size=8)
        schema.upgrade(engine)
        yield Store(engine, clock=Clock())
        engine.dispose()


def test_writes_during_consolidation_are_all_present(store: Store) -> None:
    scopes = [Scope("acme", f"user{i}", "triage") for i in range(4)]
    for n, scope in enumerate(scopes):  # duplicates to merge, old episodes to compact
        store.apply(
            [
                candidate(f"disk {j} of db-{n} is full", scope=scope, run=f"seed-{n}")
                for j in range(20)
            ]
            + [
                candidate(
                    f"Disk {j} of DB-{n} is full", scope=scope, run=f"seed-{n}", idem=f"dup-{j}"
                )
                for j in range(20)
            ]
            + [
                candidate(f"handled INC-{j}", scope=scope, kind=Kind.EPISODE, run=f"seed-{n}")
                for j in range(12)
            ],
            handle=f"seed-{n}",
            actor="w",
        )
    store.clock.advance(days=40)  # type: ignore[attr-defined]
    handles: list[str] = []
    failures: list[BaseException] = []

    def writer() -> None:
        try:
            for i in range(WRITES):
                scope = scopes[i % len(scopes)]
                batch = [
                    candidate(f"fresh fact {i}", scope=scope, run=f"w{i}"),
                    candidate(f"disk {i % 20} of db-{i % 4} is full", scope=scope, run=f"w{i}"),
                    candidate(f"value {i}", scope=scope, key=f"slot.{i % 5}", run=f"w{i}"),
                ]
                store.apply(batch, handle=f"w{i}", actor="w")
                handles.append(f"w{i}")
        except BaseException as error:  # reported below; a thread cannot fail the test itself
            failures.append(error)

    thread = threading.Thread(target=writer)
    thread.start()
    passes, merged, compacted = 0, 0, 0
    while thread.is_alive() or passes < 2:
        [(_, report)], _ = consolidation.consolidate(store.engine, "acme", store.clock())
        assert report is not None
        passes, merged, compacted = passes + 1, merged + report.merged, compacted + report.compacted
    thread.join()
    assert not failures, failures
    assert len(handles) == WRITES and passes >= 2
    assert merged > 0 and compacted == 48  # it really merged and compacted while writes landed

    with store.engine.connect() as conn:
        rows = {r.id: r for r in conn.execute(select(memories))}
        live = conn.execute(
            select(func.count()).where(memories.c.status == Status.ACTIVE.value)
        ).scalar_one()
    for handle in handles:
        receipt = store.receipt(handle)
        assert receipt is not None
        for decision in receipt.decisions:
            assert decision.memory_id in rows, (handle, decision)
    for row in rows.values():  # nothing vanished: an inactive row names a successor that exists
        if row.status == Status.SUPERSEDED.value:
            assert row.superseded_by_id in rows
    fresh = {r.content for r in rows.values() if r.content.startswith("fresh fact")}
    assert fresh == {f"fresh fact {i}" for i in range(WRITES)}
    assert live > 0
