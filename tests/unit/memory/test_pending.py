"""The queued writes of a transaction (`memory.pending`), without a database."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from memory import pending
from memory.records import Candidate, Kind, Memory, Provenance, Scope, Source, Status
from memory.tables import memories
from memory.writing import new_memory


def test_the_insert_names_every_column_a_memory_has() -> None:
    columns = [name for name, _ in pending._MEMORY_COLUMNS]
    assert sorted(columns) == sorted(c.name for c in memories.c if c.name != "search_vector")


def test_a_memory_row_holds_what_to_values_holds() -> None:
    from memory.queries import to_values

    now = datetime(2026, 3, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
    candidate = Candidate(
        scope=Scope("acme", "ana", "triage"),
        kind=Kind.FACT,
        content='Zoë said "renew" \\ on 3/1',
        key="customer.renewal",
        provenance=Provenance(Source.STATED, reference="msg#9", task_id="t-1"),
    )
    memory = new_memory(candidate, Kind.FACT, Status.ACTIVE, now, "old-id")
    row = json.loads(json.dumps(pending._memory_row(memory, pending._IsoTimes())))
    expected = to_values(memory)
    for name, value in expected.items():
        if isinstance(value, datetime):
            assert datetime.fromisoformat(row[name]) == value
            assert row[name].endswith("+00:00")  # stored as UTC, like Timestamp does
        else:
            assert row[name] == value, name


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        pending._IsoTimes()(datetime(2026, 3, 1, 12, 0))


def test_an_instant_is_formatted_once() -> None:
    iso = pending._IsoTimes()
    at = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert iso(at) is iso(at)
    assert iso(None) is None


def test_nothing_queued_is_falsy() -> None:
    queue = pending.PendingWrites()
    assert not queue
    queue.successors.append(("a", "b", datetime(2026, 3, 1, tzinfo=UTC)))
    assert queue


def test_rows_share_the_batch_s_not_null_values_and_drop_their_nulls() -> None:
    rows = [
        {"handle": "h1", "tenant": "acme", "run_id": "r1", "created_at": "t0", "decisions": []},
        {"handle": "h2", "tenant": "acme", "run_id": "r2", "created_at": "t0", "decisions": [1]},
    ]
    shared, compact = pending._compact("receipts", rows)
    assert shared == rows[0]  # every receipt column is NOT NULL
    assert compact == [{}, {"handle": "h2", "run_id": "r2", "decisions": [1]}]

    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    candidate = Candidate(Scope("acme", "ana"), Kind.FACT, "x", Provenance(Source.STATED))
    row = pending._memory_row(
        new_memory(candidate, Kind.FACT, Status.ACTIVE, now, None), pending._IsoTimes()
    )
    shared, [compact_row] = pending._compact("memories", [row])
    assert "valid_to" not in shared and "valid_to" not in compact_row  # nullable, NULL: left out
    assert shared["user_id"] == "ana" and shared["agent_id"] == ""  # NOT NULL, kept even empty


def test_a_nullable_value_stays_in_its_row() -> None:
    rows = [
        {
            "at": "t0",
            "actor": "w",
            "tenant": "acme",
            "action": "a",
            "memory_id": "m1",
            "detail": {},
        },
        {
            "at": "t0",
            "actor": "w",
            "tenant": "acme",
            "action": "a",
            "memory_id": None,
            "detail": {},
        },
    ]
    shared, compact = pending._compact("audit", rows)
    assert "memory_id" not in shared  # nullable: never shared, so never taken for another row
    assert compact == [{"memory_id": "m1"}, {}]


def test_a_none_in_a_not_null_column_is_refused_not_filled_in() -> None:
    rows = [
        {"handle": "h1", "tenant": "acme", "run_id": "r1", "created_at": "t0", "decisions": []},
        {"handle": "h2", "tenant": None, "run_id": "r2", "created_at": "t0", "decisions": []},
    ]
    with pytest.raises(ValueError, match="receipts.tenant is NOT NULL"):
        pending._compact("receipts", rows)


def test_the_memories_document_is_the_compacted_rows() -> None:
    """`_memory_document` sends what `_compact` of the `_memory_row`s would mean: each
    row merged with the batch's values is the row, whatever the rows have in common."""
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    later = now + timedelta(days=3)

    def made(scope: Scope, key: str, source: Source, **changes: Any) -> Memory:
        candidate = Candidate(
            scope, Kind.FACT, f"{key} {source}", Provenance(source, reference="msg#1"), key=key
        )
        row = new_memory(candidate, Kind.FACT, Status.ACTIVE, now, None)
        return dataclasses.replace(row, **changes)

    ana, bob = Scope("acme", "ana", "triage"), Scope("acme", "bob")
    rows = [
        made(ana, "diet", Source.STATED),
        made(ana, "Diet ", Source.STATED, valid_to=later, supersedes_id="old"),
        made(bob, "", Source.OBSERVED),  # another scope and source: compacted the general way
        made(
            ana,
            "plan",
            Source.STATED,
            status=Status.SUPERSEDED,
            superseded_at=later,
            superseded_by_id="new",
            valid_to=later,
        ),
        made(ana, "x", Source.STATED, last_used_at=later),
    ]
    iso = pending._IsoTimes()
    shared, compact = pending._memory_document(rows, iso)
    assert len(compact) == len(rows)
    for memory, sent in zip(rows, compact, strict=True):
        whole = pending._memory_row(memory, iso)
        merged = {name: sent.get(name, shared.get(name)) for name in whole}
        assert merged == whole
    assert pending._memory_document([], iso) == ({}, [])


def test_a_none_in_a_row_s_own_not_null_field_is_refused() -> None:
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    candidate = Candidate(Scope("acme", "ana"), Kind.FACT, "x", Provenance(Source.STATED))
    row = new_memory(candidate, Kind.FACT, Status.ACTIVE, now, None)
    with pytest.raises(ValueError, match="NOT NULL"):
        pending._memory_document(
            [row, dataclasses.replace(row, reference=None)], pending._IsoTimes()
        )


def test_a_decision_is_read_as_stored_now_and_as_stored_before() -> None:
    from memory.receipts import Decision, Outcome

    decision = Decision(3, Outcome.SUPERSEDED, "fact", "ok", "accepted", "new-id", "old-id")
    assert Decision.from_json(json.loads(json.dumps(decision.stored()))) == decision
    assert Decision.from_json(json.loads(json.dumps(decision.to_json()))) == decision
