"""A writer that applies from what it remembers of its slots (`memory.known_slots`), on
PostgreSQL, while other writers change those slots behind it: every decision comes
out as a fresh read would have made it, and nothing of a stale statement lands."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from memory.receipts import Outcome
from memory.records import Candidate, Kind, Provenance, Scope, Source, Status
from memory.store import Store
from tests.clock import Clock
from tests.integration.sql_watch import Statements

pytestmark = pytest.mark.integration

ANA = Scope("acme", "ana", "triage")


@pytest.fixture
def writer(pg_engine: Engine, clock: Clock) -> Store:
    """The shard's writer, which remembers what it wrote."""
    return Store(pg_engine, clock=clock)


@pytest.fixture
def other(pg_engine: Engine, clock: Clock) -> Store:
    """Another process on the same database (a second consumer, the operator's CLI)."""
    return Store(pg_engine, clock=clock)


def fact(
    content: str, task: str, *, source: Source = Source.OBSERVED, key: str = "diet", idem: str = ""
) -> Candidate:
    return Candidate(
        scope=ANA,
        kind=Kind.FACT,
        content=content,
        key=key,
        idempotency_key=idem,
        provenance=Provenance(source, reference="feed#1", task_id=task, agent="triage"),
    )


def write(store: Store, candidate: Candidate, handle: str) -> tuple[Outcome, str | None]:
    (decision,) = store.apply([candidate], handle=handle, actor="w").decisions
    return decision.outcome, decision.superseded_id


def active(store: Store) -> list[str]:
    return [m.content for m in store.history(ANA, "diet") if m.status is Status.ACTIVE]


def test_a_known_slot_costs_one_statement_and_an_unknown_one_a_read_first(
    writer: Store, other: Store
) -> None:
    write(writer, fact("vegetarian", "run-1"), "h1")
    with Statements() as known:
        write(writer, fact("vegan", "run-2"), "h2")
    with Statements() as unknown:
        write(other, fact("pescatarian", "run-3"), "h3")  # `other` never saw the slot
    assert known.seen == ["EXECUTE"]
    assert unknown.seen == ["EXECUTE", "EXECUTE"]


def test_a_slot_superseded_by_another_writer_is_read_again(writer: Store, other: Store) -> None:
    write(writer, fact("vegetarian", "run-1"), "h1")
    _, first_gone = write(other, fact("vegan", "run-2"), "h2")
    outcome, superseded = write(writer, fact("pescatarian", "run-3"), "h3")
    assert outcome is Outcome.SUPERSEDED
    chain = writer.history(ANA, "diet")
    assert [m.content for m in chain] == ["vegetarian", "vegan", "pescatarian"]
    assert superseded == chain[1].id and first_gone == chain[0].id  # not the remembered row
    assert active(writer) == ["pescatarian"]
    # The stale statement left nothing: one receipt per handle, one audit entry per write.
    assert [e.action for e in writer.audit("acme")].count("write.superseded") == 2


def test_an_edit_behind_the_writer_is_seen_before_it_decides(writer: Store, other: Store) -> None:
    write(writer, fact("vegetarian", "run-1"), "h1")
    (row,) = writer.history(ANA, "diet")
    other.edit(ANA, row.id, version=row.version, content="vegan", actor="operator")
    # Remembered, the slot holds "vegetarian" and "vegan" would supersede it; the row
    # now says "vegan", so the same value is a duplicate.
    outcome, _ = write(writer, fact("vegan", "run-2"), "h2")
    assert outcome is Outcome.DUPLICATE
    assert active(writer) == ["vegan"]


def test_a_row_removed_behind_the_writer_is_not_superseded(
    writer: Store, pg_engine: Engine
) -> None:
    write(writer, fact("vegetarian", "run-1"), "h1")
    with pg_engine.begin() as conn:  # as a forget removes a person's rows
        conn.exec_driver_sql("DELETE FROM ns_memories")
    outcome, superseded = write(writer, fact("vegan", "run-2"), "h2")
    assert (outcome, superseded) == (Outcome.STORED, None)
    assert active(writer) == ["vegan"]


def test_the_persons_statement_behind_the_writer_still_outranks_an_inference(
    writer: Store, other: Store
) -> None:
    write(writer, fact("vegetarian", "run-1"), "h1")
    write(other, fact("vegan", "run-2", source=Source.STATED), "h2")
    outcome, _ = write(writer, fact("pescatarian", "run-3"), "h3")
    assert outcome is Outcome.REVIEW
    assert active(writer) == ["vegan"]


def test_a_slot_remembered_empty_that_another_writer_filled_is_read_again(
    writer: Store, other: Store
) -> None:
    # An inference waits for review: the writer knows the slot as empty…
    assert write(writer, fact("vegan", "run-1", source=Source.INFERRED), "h1")[0] is Outcome.REVIEW
    # …and the person states their diet through another process.
    assert write(other, fact("vegetarian", "run-2", source=Source.STATED), "h2")[0] is (
        Outcome.STORED
    )
    outcome, _ = write(writer, fact("pescatarian", "run-3"), "h3")
    assert outcome is Outcome.REVIEW  # the statement outranks it, as a fresh read shows
    assert active(writer) == ["vegetarian"]


def test_a_retry_under_a_new_handle_is_a_duplicate_not_a_second_row(writer: Store) -> None:
    first = fact("vegetarian", "run-1", key="", idem="msg-1")
    write(writer, first, "h1")
    with Statements() as statements:
        outcome, _ = write(writer, first, "h1-again")
    assert outcome is Outcome.DUPLICATE
    # The one statement met the idempotency index and left nothing; the batch was
    # applied again the ordinary way, which read the key.
    assert statements.seen[0] == "EXECUTE" and len(statements.seen) > 1
    assert len(list(writer.export(ANA))) == 1


def test_a_duplicate_of_a_row_expired_behind_the_writer_is_stored_again(
    writer: Store, pg_engine: Engine
) -> None:
    write(writer, fact("vegetarian", "run-1"), "h1")
    with pg_engine.begin() as conn:  # as the expiry pass or a LangGraph delete does
        conn.exec_driver_sql("UPDATE ns_memories SET status = 'expired'")
    # Every candidate a duplicate of what the writer remembers: the statement writes no
    # new row, and still checks the remembered one.
    outcome, _ = write(writer, fact("vegetarian", "run-2"), "h2")
    assert outcome is Outcome.STORED
    assert active(writer) == ["vegetarian"]


def test_a_writer_new_to_a_scope_reads_its_slots_and_lets_the_index_answer_for_keys(
    writer: Store, other: Store
) -> None:
    """A writer that has not met the scope reads its slots, not its idempotency keys:
    a key another writer stored fails the one statement, and the ordinary apply,
    which reads it, replaces the earlier write as it would have from the start."""
    write(other, fact("vegetarian", "run-1", idem="msg-1"), "h1")
    with Statements() as statements:
        outcome, _ = write(writer, fact("vegan", "run-1", idem="msg-1"), "h1-retry")
    assert outcome is Outcome.REPLACED
    assert len(statements.seen) > 2  # the lookup, the failed statement, the ordinary apply
    assert active(writer) == ["vegan"]
    assert len(list(writer.export(ANA))) == 1
