"""Records as the read paths build them from rows."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from memory.queries import to_values
from memory.records import Candidate, Kind, Memory, Provenance, Scope, Source, Status
from memory.writing import new_memory


def test_a_row_comes_back_as_the_memory_it_was_made_from() -> None:
    """Every field distinct, so that a value read into the wrong field shows
    (`Memory.from_row` builds the record positionally)."""
    at = datetime(2026, 5, 1, tzinfo=UTC)
    memory = Memory(
        id="id-1",
        scope=Scope("tenant-1", "user-1", "agent-1"),
        kind=Kind.PREFERENCE,
        content="content-1",
        key="key-1",
        status=Status.PENDING_REVIEW,
        source=Source.INFERRED,
        confidence=0.42,
        reference="reference-1",
        run_id="run-1",
        task_id="task-1",
        agent="agent-2",
        subagent="subagent-1",
        schedule="schedule-1",
        subject="subject-1",
        idempotency_key="idem-1",
        version=7,
        score=0.9,
        created_at=at,
        valid_from=at + timedelta(seconds=1),
        valid_to=at + timedelta(seconds=2),
        superseded_at=at + timedelta(seconds=3),
        supersedes_id="id-0",
        superseded_by_id="id-2",
        last_reinforced_at=at + timedelta(seconds=4),
        last_used_at=at + timedelta(seconds=5),
    )
    assert Memory.from_row(to_values(memory)) == memory


def test_a_candidate_becomes_the_row_its_provenance_says() -> None:
    """`new_memory` builds the record positionally too: every provenance field
    distinct, each must land in its own field."""
    at = datetime(2026, 5, 1, tzinfo=UTC)
    candidate = Candidate(
        scope=Scope("tenant-1", "user-1", "agent-1"),
        kind=Kind.FACT,
        content="content-1",
        key="key-1",
        idempotency_key="idem-1",
        valid_to=at + timedelta(days=1),
        provenance=Provenance(
            Source.OBSERVED,
            reference="reference-1",
            run_id="run-1",
            task_id="task-1",
            agent="agent-2",
            subagent="subagent-1",
            schedule="schedule-1",
            subject="subject-1",
        ),
    )
    memory = new_memory(candidate, Kind.GOAL, Status.PENDING_REVIEW, at, "id-0")
    assert dataclasses.replace(memory, id="") == Memory(
        id="",
        scope=candidate.scope,
        kind=Kind.GOAL,
        content="content-1",
        key="key-1",
        status=Status.PENDING_REVIEW,
        source=Source.OBSERVED,
        confidence=0.8,
        reference="reference-1",
        run_id="run-1",
        task_id="task-1",
        agent="agent-2",
        subagent="subagent-1",
        schedule="schedule-1",
        subject="subject-1",
        idempotency_key="idem-1",
        version=1,
        score=1.0,
        created_at=at,
        valid_from=at,
        valid_to=at + timedelta(days=1),
        superseded_at=None,
        supersedes_id="id-0",
        superseded_by_id=None,
        last_reinforced_at=at,
        last_used_at=None,
    )
