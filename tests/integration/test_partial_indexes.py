"""The load and the slot lookups can use the partial indexes (0008) on both dialects.

A partial index serves a statement only when the statement carries the index's
own predicate as written: a bound parameter in its place (`status = ?`) does not
match on SQLite, nor in a PostgreSQL prepared statement's generic plan. These
tests EXPLAIN the statements the store really sends, with PostgreSQL's generic
plan forced and sequential scans off, so a predicate that stops matching shows
up as another index in the plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, event

from memory.records import Candidate, Kind, Provenance, Scope, Source
from memory.store import Store

pytestmark = pytest.mark.integration

ANA = Scope("acme", "ana", "triage")


def fact(content: str, key: str = "", task: str = "t1") -> Candidate:
    return Candidate(
        scope=ANA,
        kind=Kind.FACT,
        content=content,
        key=key,
        provenance=Provenance(Source.STATED, reference="msg#1", task_id=task, agent="triage"),
    )


class Plans:
    """The plan of every read any engine runs inside the `with` block, explained on
    the same connection right after it ran."""

    def __init__(self) -> None:
        self.plans: list[tuple[str, str]] = []
        self._busy = False

    def __enter__(self) -> Plans:
        event.listen(Engine, "after_cursor_execute", self._explain)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(Engine, "after_cursor_execute", self._explain)

    def _explain(self, conn: Any, cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if self._busy or not statement.lstrip().upper().startswith(("SELECT", "EXECUTE")):
            return
        self._busy = True
        own = conn.connection.dbapi_connection.cursor()
        try:
            if conn.dialect.name == "postgresql":
                own.execute("SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off")
                own.execute("EXPLAIN " + statement, parameters)
                plan = "\n".join(row[0] for row in own.fetchall())
                own.execute("RESET plan_cache_mode; RESET enable_seqscan")
            else:
                own.execute("EXPLAIN QUERY PLAN " + statement, parameters)
                plan = "\n".join(str(row[-1]) for row in own.fetchall())
        finally:
            own.close()
            self._busy = False
        self.plans.append((statement, plan))

    def using(self, index: str) -> list[str]:
        return [statement for statement, plan in self.plans if index in plan]


@pytest.fixture
def filled(store: Store) -> Iterator[Store]:
    store.apply(
        [fact("ana prefers mornings"), fact("ana lives in Lisbon", key="home")],
        handle="h1",
        actor="ana",
    )
    yield store


def test_a_load_reads_the_active_rows_index(filled: Store, engine: Engine) -> None:
    with Plans() as plans:
        loaded = filled.load(ANA, goal="plan the week", trigger="Lisbon mornings")
    assert len(loaded) == 2
    assert plans.using("ix_ns_memories_loadable"), plans.plans


def test_a_slot_lookup_reads_the_keyed_rows_index(filled: Store, engine: Engine) -> None:
    with Plans() as plans:
        filled.apply([fact("ana lives in Porto", "home", task="t2")], handle="h2", actor="ana")
    assert plans.using("ix_ns_memories_scope_key"), plans.plans
    assert [m.content for m in filled.history(ANA, "home")] == [
        "ana lives in Lisbon",
        "ana lives in Porto",
    ]
