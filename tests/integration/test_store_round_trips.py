"""The store's hot paths on real databases: how many statements they cost, and that
the shortcuts (queued writes, a load's winners taken from its pool) change no result.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import Engine

from memory import sql
from memory.dialect import DriverStatement, array_literal
from memory.engine import ROUND_TRIP, autocommit
from memory.meanwhile import Meanwhile
from memory.receipts import Outcome
from memory.records import Candidate, Kind, Provenance, Scope, Source
from memory.store import Store
from tests.clock import Clock
from tests.integration.sql_watch import Statements

pytestmark = pytest.mark.integration

ANA = Scope("acme", "ana", "triage")


@pytest.fixture
def pg_store(pg_engine: Engine, clock: Clock) -> Store:
    return Store(pg_engine, clock=clock)


def candidate(content: str, *, key: str = "", task: str = "run-1") -> Candidate:
    return Candidate(
        scope=ANA,
        kind=Kind.FACT,
        content=content,
        key=key,
        provenance=Provenance(Source.OBSERVED, reference="feed#1", task_id=task, agent="triage"),
    )


def test_an_apply_sends_its_writes_as_one_statement(engine: Engine, store: Store) -> None:
    store.apply([candidate("plan: v1", key="plan", task="run-0")], handle="h0", actor="w")
    with Statements() as statements:
        receipt = store.apply(
            [candidate(f"note {i}") for i in range(5)]
            + [candidate("plan: v2", key="plan", task="run-1")],
            handle="h1",
            actor="w",
        )
    outcomes = [d.outcome for d in receipt.decisions]
    assert outcomes == [Outcome.STORED] * 5 + [Outcome.SUPERSEDED]
    writes = [s for s in statements.seen if s not in ("SELECT", "BEGIN", "PRAGMA")]
    if engine.dialect.name == "postgresql":
        # One statement, prepared by the apply before: the slot is the one the first
        # apply left (`memory.known_slots`), so there is nothing to read; the
        # receipt's primary key says whether the handle was applied before
        assert statements.seen == ["EXECUTE"]
    else:
        assert writes  # SQLite runs the plain statements, in process
    # …and nothing of what that statement carried was lost.
    assert store.receipt("h1") == receipt
    assert len(store.audit("acme")) == 7
    old, new = store.history(ANA, "plan")
    assert (old.superseded_by_id, new.supersedes_id) == (new.id, old.id)
    assert old.valid_to == new.valid_from


def test_each_connection_measures_its_round_trip_as_it_connects(pg_engine: Engine) -> None:
    with autocommit(pg_engine) as conn:
        measured = conn.connection.info[ROUND_TRIP]
        assert 0 < measured < 1
        assert conn.connection.dbapi_connection.get_transaction_status() == 0  # idle, no BEGIN
    with pg_engine.connect() as conn:
        assert 0 < conn.connection.info[ROUND_TRIP] < 1


@pytest.mark.parametrize("far", [False, True])
def test_the_lookup_reads_in_a_thread_only_across_a_network(
    pg_engine: Engine, pg_store: Store, clock: Clock, far: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[Meanwhile[object]] = []

    def counted(work: Any) -> Meanwhile[object]:
        threads.append(Meanwhile(work))
        return threads[-1]

    monkeypatch.setattr(sql, "Meanwhile", counted)
    monkeypatch.setattr(sql, "worth_a_thread", lambda round_trip: far)
    pg_store.apply([candidate("plan: v1", key="plan", task="run-0")], handle="h0", actor="w")
    # A writer that has not seen the slot (another process, or after a restart) reads it.
    receipt = Store(pg_engine, clock=clock).apply(
        [candidate("plan: v2", key="plan", task="run-1")], handle="h1", actor="w"
    )
    assert len(threads) == (2 if far else 0)
    assert [d.outcome for d in receipt.decisions] == [Outcome.SUPERSEDED]


def test_audit_and_receipt_keep_awkward_text(store: Store) -> None:
    content = 'Zoë wrote "renew on 3/1" \\ and 100% sure'
    receipt = store.apply([candidate(content, key="renewal")], handle='h"1\\', actor="wr'iter")
    [memory] = store.show(ANA)
    assert memory.content == content
    [entry] = store.audit("acme", memory.id)
    assert entry.actor == "wr'iter"
    assert entry.detail["handle"] == 'h"1\\'
    assert entry.detail["scope"] == str(ANA)
    assert store.receipt('h"1\\') == receipt


AWKWARD = ['a"b', "back\\slash", "x,y", "{braced}", "NULL", "", " padded ", "Zoë", "'quote'"]


@pytest.mark.parametrize(
    "values", [AWKWARD, [], ["plain", "ids"], ['"'], ["\\"], ['a"', "b"], ["", ""]]
)
def test_array_literals_arrive_as_the_values_they_hold(
    pg_engine: Engine, values: list[str]
) -> None:
    with autocommit(pg_engine) as conn:
        sent = conn.exec_driver_sql("SELECT %(a)s::varchar[]", {"a": array_literal(values)})
        assert list(sent.scalar_one()) == values


def test_awkward_keys_are_found_again_by_the_next_apply(store: Store) -> None:
    """The lookup sends keys as array literals (`memory.dialect.array_literal`)."""
    batch = [candidate(f"value of {k!r}", key=k or "plain", task=k) for k in AWKWARD]
    first = store.apply(batch, handle="first", actor="writer")
    again = store.apply(batch, handle="again", actor="writer")
    assert {d.outcome for d in first.decisions} == {Outcome.STORED}
    assert [d.memory_id for d in again.decisions] == [d.memory_id for d in first.decisions]
    assert {d.outcome for d in again.decisions} == {Outcome.DUPLICATE}


def test_a_load_gives_the_rows_get_gives(store: Store, clock: Clock) -> None:
    store.apply([candidate(f"renewal note {i} for acme") for i in range(8)], handle="h", actor="w")
    clock.advance(hours=1)
    loaded = store.load(ANA, goal="renewal acme")
    assert len(loaded) == 8
    assert {m.id: m for m in loaded.ranked} == {m.id: m for m in store.get(ANA, loaded.ids)}
    for memory in loaded.ranked:
        assert memory.created_at.utcoffset() == timedelta(0)
        assert memory.last_reinforced_at.utcoffset() == timedelta(0)


def test_a_load_costs_one_statement(engine: Engine, store: Store) -> None:
    store.apply([candidate(f"renewal note {i}") for i in range(3)], handle="h", actor="w")
    first = store.load(ANA, goal="renewal")  # on PostgreSQL this one also prepares
    with Statements() as statements:
        again = store.load(ANA, goal="renewal")
    assert again == first and len(again) == 3
    expected = "EXECUTE" if engine.dialect.name == "postgresql" else "SELECT"
    assert [s for s in statements.seen if s in ("SELECT", "WITH", "EXECUTE")] == [expected]


def test_a_load_survives_its_prepared_statement_vanishing(
    pg_engine: Engine, pg_store: Store
) -> None:
    pg_store.apply([candidate(f"renewal note {i}") for i in range(3)], handle="h", actor="w")
    first = pg_store.load(ANA, goal="renewal")
    with autocommit(pg_engine) as conn:  # the pool hands back the connection the load used
        conn.exec_driver_sql("DEALLOCATE ALL")
    assert pg_store.load(ANA, goal="renewal") == first
    assert pg_store.load(ANA, goal="renewal") == first  # and prepares it again


def test_a_load_survives_a_session_that_already_holds_its_prepared_statement(
    pg_engine: Engine, pg_store: Store
) -> None:
    pg_store.apply([candidate(f"renewal note {i}") for i in range(3)], handle="h", actor="w")
    first = pg_store.load(ANA, goal="renewal")
    with autocommit(pg_engine) as conn:  # as if a pooler handed us a session prepared by another
        conn.connection.info["ns_prepared"].clear()
    assert pg_store.load(ANA, goal="renewal") == first


def test_loads_run_their_generic_plan_planned_once(pg_engine: Engine, pg_store: Store) -> None:
    pg_store.apply([candidate(f"renewal note {i}") for i in range(3)], handle="h", actor="w")
    for _ in range(8):  # left to PostgreSQL, these would all be custom plans
        pg_store.load(ANA, goal="renewal")
    with autocommit(pg_engine) as conn:  # the connection the loads used, and its session
        plans = conn.exec_driver_sql(
            "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE position('ranked' in statement) > 0"
        ).all()
        mode = conn.exec_driver_sql("SHOW plan_cache_mode").scalar()
    assert plans == [(8, 0)]
    assert mode == "auto"  # the setting lived only as long as each load


@pytest.mark.parametrize("retry_first", [True, False], ids=["retry-then-slot", "slot-then-retry"])
def test_a_row_retried_and_superseded_in_one_batch_is_written_once(
    store: Store, retry_first: bool
) -> None:
    """One batch both replaces a stored row's text (a retry of its idempotency key) and
    supersedes it (a new value for its slot): both changes land, in one update. A
    retry that comes after the supersession finds the row superseded and is refused:
    history is not rewritten."""
    first = Candidate(
        scope=ANA,
        kind=Kind.FACT,
        content="plan: v1",
        key="plan",
        idempotency_key="k1",
        provenance=Provenance(Source.OBSERVED, reference="feed#1", task_id="run-1"),
    )
    store.apply([first], handle="h0", actor="w")
    retry = first.replace(content="plan: v1 (corrected)")
    successor = first.replace(content="plan: v2", idempotency_key="k2")
    batch = [retry, successor] if retry_first else [successor, retry]
    receipt = store.apply(batch, handle="h1", actor="w")
    outcomes = {d.outcome for d in receipt.decisions}
    retried = Outcome.REPLACED if retry_first else Outcome.REFUSED
    assert outcomes == {retried, Outcome.SUPERSEDED}
    old, new = store.history(ANA, "plan")
    assert old.content == ("plan: v1 (corrected)" if retry_first else "plan: v1")
    assert (old.status.value, old.superseded_by_id, new.supersedes_id) == (
        "superseded",
        new.id,
        old.id,
    )
    assert old.version == (3 if retry_first else 2)  # one bump for each change
    assert [m.id for m in store.search(ANA, "corrected")] == []  # superseded: not loadable
    assert [m.content for m, _ in store.search(ANA, "v2")] == ["plan: v2"]


def test_a_batch_over_several_scopes_finds_each_scope_s_rows(engine: Engine, store: Store) -> None:
    other = Scope("acme", "bob", "triage")
    tenant = Scope("acme")
    batch = [
        candidate("ana's plan v1", key="plan"),
        candidate("note for ana"),
        Candidate(other, Kind.FACT, "bob's plan v1", Provenance(Source.OBSERVED), key="plan"),
        Candidate(tenant, Kind.FACT, "house rule", Provenance(Source.OPERATOR), key="rule"),
    ]
    store.apply(batch, handle="h0", actor="w")
    again = store.apply(batch, handle="h1", actor="w")
    assert [d.outcome for d in again.decisions] == [Outcome.DUPLICATE] * 4
    later = [
        candidate("ana's plan v2", key="plan", task="run-2"),
        Candidate(
            other,
            Kind.FACT,
            "bob's plan v2",
            Provenance(Source.OBSERVED, task_id="run-2"),
            key="plan",
        ),
    ]
    # A writer that has not seen these slots (`memory.known_slots`) reads them.
    with Statements() as statements:
        receipt = Store(engine, clock=store.clock).apply(later, handle="h2", actor="w")
    assert [d.outcome for d in receipt.decisions] == [Outcome.SUPERSEDED] * 2
    assert [m.content for m in store.history(ANA, "plan")] == ["ana's plan v1", "ana's plan v2"]
    assert [m.content for m in store.history(other, "plan")] == ["bob's plan v1", "bob's plan v2"]
    if engine.dialect.name == "postgresql":
        assert statements.seen == ["EXECUTE", "EXECUTE"]  # one lookup for all scopes


def test_a_replayed_handle_gets_its_receipt_and_changes_nothing(store: Store) -> None:
    """On PostgreSQL the replay fails its one statement on the receipt's key, then
    runs the ordinary way and finds the receipt; elsewhere it finds it first."""
    first = store.apply(
        [candidate("plan: v1", key="plan"), candidate("a note")], handle="h", actor="w"
    )
    audited = store.audit("acme")
    again = store.apply(
        [candidate("plan: v2", key="plan", task="run-2"), candidate("another note")],
        handle="h",
        actor="w",
    )
    assert again == first
    assert sorted(m.content for m in store.show(ANA)) == ["a note", "plan: v1"]
    assert store.audit("acme") == audited


def test_an_apply_that_fails_on_postgresql_leaves_nothing_behind(
    pg_engine: Engine, pg_store: Store
) -> None:
    """The apply's writes are one autocommit statement: a failure anywhere in it (here
    its audit rows, refused by a constraint the test adds, after the rows and the
    update before them in the statement) undoes the queued update of an earlier row too."""
    first = candidate("plan: v1", key="plan")
    pg_store.apply([first], handle="h0", actor="w")
    with autocommit(pg_engine) as conn:
        conn.exec_driver_sql(
            "ALTER TABLE ns_audit ADD CONSTRAINT test_fault CHECK (actor <> 'faulty')"
        )
    retried = first.replace(content="plan: v1 edited")
    with pytest.raises(Exception, match="test_fault") as failed:
        pg_store.apply([retried, candidate("fine text")], handle="h1", actor="faulty")
    # The error goes to logs and task results: it names the statement, never the
    # batch's content (a forget could not reach it there).
    assert "fine text" not in str(failed.value) and "v1 edited" not in str(failed.value)
    assert [m.content for m in pg_store.show(ANA, all_statuses=True)] == ["plan: v1"]
    assert pg_store.receipt("h1") is None
    assert len(pg_store.audit("acme")) == 1


def test_a_connection_whose_prepared_statements_keep_vanishing_stops_preparing(
    pg_engine: Engine, pg_store: Store
) -> None:
    """As behind pgbouncer in transaction mode: each load may land on a server
    session without the statement. After two misses the connection runs plain."""
    pg_store.apply([candidate(f"renewal note {i}") for i in range(3)], handle="h", actor="w")
    first = pg_store.load(ANA, goal="renewal")
    for _ in range(2):
        with autocommit(pg_engine) as conn:
            conn.exec_driver_sql("DEALLOCATE ALL")
        assert pg_store.load(ANA, goal="renewal") == first  # misses, answers plain
        assert pg_store.load(ANA, goal="renewal") == first  # prepares again
    with Statements() as statements:
        assert pg_store.load(ANA, goal="renewal") == first
    assert statements.seen == ["SELECT"]


def test_every_row_gets_its_search_vector_however_it_was_written(
    pg_engine: Engine, pg_store: Store
) -> None:
    """The writer's INSERT brings the vector; any other INSERT leaves it to the
    trigger; an edit recomputes it. All three agree with `to_tsvector`."""
    pg_store.apply([candidate("renewal due in March", key="renewal")], handle="h", actor="w")
    [written] = pg_store.show(ANA)
    pg_store.edit(ANA, written.id, version=written.version, content="renewal moved", actor="op")
    with pg_engine.begin() as conn:
        conn.exec_driver_sql(
            "INSERT INTO ns_memories (id, tenant, user_id, agent_id, kind, key, content,"
            " content_hash, status, source, confidence, reference, run_id, task_id, agent,"
            " subagent, schedule, subject, idempotency_key, version, score, created_at,"
            " valid_from, last_reinforced_at) SELECT 'plain', tenant, user_id, agent_id, kind,"
            " '', 'invoices go to finance', 'x', status, source, confidence, reference, run_id,"
            " task_id, agent, subagent, schedule, subject, 'plain', 1, 1.0, created_at,"
            " valid_from, last_reinforced_at FROM ns_memories WHERE status = 'active'"
        )
        vectors = conn.exec_driver_sql(
            "SELECT content, search_vector::text,"
            " search_vector = to_tsvector('english', content) FROM ns_memories ORDER BY content"
        ).all()
    assert vectors == [  # the edit keeps what it replaced, with its own vector
        ("invoices go to finance", "'financ':4 'go':2 'invoic':1", True),
        ("renewal due in March", "'due':2 'march':4 'renew':1", True),
        ("renewal moved", "'move':2 'renew':1", True),
    ]


def test_an_apply_survives_its_prepared_statement_vanishing(
    pg_engine: Engine, pg_store: Store
) -> None:
    pg_store.apply([candidate("plan: v1", key="plan", task="run-1")], handle="h1", actor="w")
    with autocommit(pg_engine) as conn:  # the pool hands back the connection the apply used
        conn.exec_driver_sql("DEALLOCATE ALL")
    receipt = pg_store.apply(
        [candidate("plan: v2", key="plan", task="run-2")], handle="h2", actor="w"
    )
    assert [d.outcome for d in receipt.decisions] == [Outcome.SUPERSEDED]
    assert [m.content for m in pg_store.history(ANA, "plan")] == ["plan: v1", "plan: v2"]
    assert pg_store.receipt("h2") == receipt


def test_an_apply_whose_lookup_meets_a_dead_connection_is_retried_and_lands_once(
    pg_engine: Engine, pg_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """The lookup runs in a thread (`memory.meanwhile`): its disconnect reaches the
    apply, which retries the whole unit on a new connection."""
    pg_store.apply([candidate("plan: v1", key="plan", task="run-1")], handle="h1", actor="w")
    with autocommit(pg_engine) as conn:  # the pooled connection the next apply gets
        victim = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
    with pg_engine.connect() as other:
        other.exec_driver_sql(f"SELECT pg_terminate_backend({int(victim)})")
    receipt = pg_store.apply(
        [candidate("plan: v2", key="plan", task="run-2"), candidate("a note", task="run-2")],
        handle="h2",
        actor="w",
    )
    retried = [r.message for r in caplog.records if "Retrying" in r.message]
    assert len(retried) == 1 and "closed the connection" in retried[0]
    assert [d.outcome for d in receipt.decisions] == [Outcome.SUPERSEDED, Outcome.STORED]
    assert [m.content for m in pg_store.history(ANA, "plan")] == ["plan: v1", "plan: v2"]
    assert len(pg_store.show(ANA, all_statuses=True)) == 3
    assert pg_store.receipt("h2") == receipt


def test_the_writer_s_plans_made_on_an_empty_table_still_probe_by_key(
    pg_engine: Engine, pg_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A generic plan is kept until the table is analyzed. The writer's two statements,
    planned on an empty table, must still reach rows by key once it holds thousands:
    before `by_key`, the supersession scanned the whole table at every apply."""
    with autocommit(pg_engine) as conn:  # no ANALYZE behind the test's back
        conn.exec_driver_sql("ALTER TABLE ns_memories SET (autovacuum_enabled = false)")
    sent: dict[str, tuple[DriverStatement, Mapping[str, Any]]] = {}
    execute = DriverStatement.execute

    def recording(statement: DriverStatement, conn: Any, params: Mapping[str, Any]) -> Any:
        sent[statement.name] = (statement, params)
        return execute(statement, conn, params)

    monkeypatch.setattr(DriverStatement, "execute", recording)
    first = [candidate("plan: v1", key="plan", task="run-0"), candidate("a note", task="run-0")]
    pg_store.apply(first, handle="h0", actor="w")  # plans both statements, table empty
    with autocommit(pg_engine) as conn:
        conn.exec_driver_sql(
            "INSERT INTO ns_memories (id, tenant, user_id, agent_id, kind, key, key_folded,"
            " content, content_hash, status, source, confidence, idempotency_key, created_at,"
            " valid_from, last_reinforced_at)"
            " SELECT 'bulk-' || n, 'acme', 'ana', 'triage', 'fact', 'slot-' || mod(n, 50),"
            " 'slot-' || mod(n, 50),"
            " 'bulk note ' || n, 'h', CASE WHEN n <= 50 THEN 'active' ELSE 'superseded' END,"
            " 'observed', 0.5, 'bulk:' || n, now(), now(), now()"
            " FROM generate_series(1, 5000) AS n"
        )
    retry = candidate("a note, corrected", task="run-0").replace(idempotency_key="run-0:x")
    later = [candidate("plan: v2", key="plan", task="run-1"), retry]
    receipt = pg_store.apply(later, handle="h1", actor="w")
    assert {d.outcome for d in receipt.decisions} >= {Outcome.SUPERSEDED}
    assert len(sent) == 2  # the lookup and the write
    with autocommit(pg_engine) as conn:  # the connection both ran on, and its cached plans
        for statement, params in sent.values():
            settings, _, call = statement.execute_prepared.partition(" EXECUTE ")
            conn.exec_driver_sql(f"BEGIN; {settings}")
            plan = "\n".join(
                row[0] for row in conn.exec_driver_sql(f"EXPLAIN EXECUTE {call}", dict(params))
            )
            conn.exec_driver_sql("ROLLBACK")
            assert "Seq Scan" not in plan, plan
            for line in plan.splitlines():  # every read of ns_memories finds its rows by key
                if "Scan" in line and "ns_memories" in line:
                    assert "Index" in line or "Bitmap Heap Scan" in line, plan
            assert "Index Cond: " in plan and "Filter: ((idempotency_key)" not in plan, plan


def test_writers_racing_for_one_slot_leave_one_active_value(store: Store) -> None:
    """Several writers apply a value for the same key at the same moment (a second
    consumer on a shard's queue): each value lands, one stays active, and every
    older one is superseded exactly once, in one chain."""
    writers, rounds = 4, 6
    for r in range(rounds):
        barrier = threading.Barrier(writers)

        def write(i: int, r: int = r, barrier: threading.Barrier = barrier) -> None:
            value = candidate(f"plan: v{r}.{i}", key="plan", task=f"run-{r}-{i}")
            barrier.wait()
            store.apply([value], handle=f"h{r}-{i}", actor="w")

        threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    versions = store.history(ANA, "plan")
    assert len(versions) == writers * rounds
    assert [m.content for m in store.show(ANA)] == [versions[-1].content]
    successors = [m.superseded_by_id for m in versions[:-1]]
    assert len(set(successors)) == len(successors)  # nobody superseded twice
    assert set(successors) == {m.id for m in versions[1:]}
