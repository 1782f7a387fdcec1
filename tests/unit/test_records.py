from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory.loading import bound, rank
from memory.queries import to_values
from memory.records import (
    ANY,
    Candidate,
    Kind,
    Layer,
    Memory,
    Provenance,
    Scope,
    Source,
    Status,
    content_hash,
)
from memory.writing import new_memory

NOW = datetime(2026, 12, 1, tzinfo=UTC)


@pytest.mark.parametrize(
    ("scope", "layers"),
    [
        (Scope("t", "u", "a"), ["t/u/a", "t/u/*", "t/*/a", "t/*/*"]),
        (Scope("t", "u"), ["t/u/*", "t/*/*"]),
        (Scope("t", agent="a"), ["t/*/a", "t/*/*"]),
        (Scope("t"), ["t/*/*"]),
    ],
)
def test_a_scope_reads_itself_and_the_layers_above(scope: Scope, layers: list[str]) -> None:
    assert [str(s) for s in scope.readable()] == layers


names = (
    st.sampled_from(["t1", "t2"]),
    st.sampled_from([ANY, "u1", "u2"]),
    st.sampled_from([ANY, "a1", "a2"]),
)


@given(st.builds(Scope, *names), st.builds(Scope, *names))
def test_readable_never_goes_sideways_or_down(reader: Scope, owner: Scope) -> None:
    if owner in reader.readable():
        assert owner.tenant == reader.tenant
        assert owner.user in (ANY, reader.user)
        assert owner.agent in (ANY, reader.agent)


def test_scope_parse_round_trips_and_rejects_garbage() -> None:
    assert Scope.parse("acme/*/triage") == Scope("acme", ANY, "triage")
    assert Scope.parse(str(Scope("acme", "ana", "x"))) == Scope("acme", "ana", "x")
    with pytest.raises(ValueError, match="tenant/user/agent"):
        Scope.parse("acme/ana")
    assert Scope("t", "u", "a").layer is Layer.PRIVATE


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (Scope("x/y", "", "a"), Scope("x", "y", "a")),  # a tenant with a slash
        (Scope("x", "y/*", ""), Scope("x", "y", "")),
        (Scope("x", "*", "a"), Scope("x", ANY, "a")),  # a user named *, and no user
        (Scope("x", "u@h", "a"), Scope("x", "u%40h", "a")),  # the escape itself is escaped
    ],
)
def test_different_scopes_never_read_the_same(one: Scope, other: Scope) -> None:
    assert str(one) != str(other)
    assert (Scope.parse(str(one)), Scope.parse(str(other))) == (one, other)


def test_a_plain_scope_reads_as_it_always_did() -> None:
    assert str(Scope("acme", "ana", "triage")) == "acme/ana/triage"
    assert str(Scope("acme", ANY, "triage")) == "acme/*/triage"
    assert str(Scope("tenant 7", "Żaneta", "")) == "tenant 7/Żaneta/*"
    assert str(Scope("x/y", "a*b", "c@d%")) == "x%2Fy/a%2Ab/c%40d%25"
    assert Scope.parse("x%2fy/a%2Ab/c%40d%25") == Scope("x/y", "a*b", "c@d%")
    assert Scope.parse("acme/50%off/x") == Scope("acme", "50%off", "x")  # no escape: as is


def test_candidate_json_round_trip_and_default_idempotency_key() -> None:
    c = Candidate(
        scope=Scope("t", "u", "a"),
        kind=Kind.FACT,
        content="Disk  FULL",
        key="",
        valid_to=NOW,
        provenance=Provenance(source=Source.OBSERVED, task_id="task-1", reference="x#1"),
    )
    assert Candidate.from_json(c.to_json()) == c
    assert c.effective_idempotency_key() == f"task-1:{content_hash('disk full')}"
    assert c.replace(key="disk").effective_idempotency_key() == "task-1:disk"


@pytest.mark.parametrize(
    "scope",
    [Scope("acme", "*", "triage"), Scope("acme", "ana", "*"), Scope("acme", "git/ana", "a/b")],
)
def test_a_queued_candidate_keeps_its_scope_whatever_its_names(scope: Scope) -> None:
    # A user named "*" read back as the wildcard would turn a private memory into
    # the agent layer, readable by every user of the agent.
    c = Candidate(scope, Kind.FACT, "x", Provenance(source=Source.STATED))
    assert Candidate.from_json(c.to_json()).scope == scope


def test_a_candidate_queued_by_an_earlier_release_still_reads() -> None:
    c = Candidate(Scope("acme", "ana", "triage"), Kind.FACT, "x", Provenance(source=Source.STATED))
    legacy = {**c.to_json(), "scope": "acme/ana/triage"}
    assert Candidate.from_json(legacy) == c


def memory(
    content: str, *, confidence: float = 0.8, age_days: float = 0, score: float = 1.0
) -> Memory:
    at = NOW - timedelta(days=age_days)
    return Memory(
        id=content,
        scope=Scope("t"),
        kind=Kind.FACT,
        content=content,
        key="",
        status=Status.ACTIVE,
        source=Source.OBSERVED,
        confidence=confidence,
        reference="",
        run_id="",
        task_id="",
        agent="",
        subagent="",
        schedule="",
        subject="",
        idempotency_key=content,
        version=1,
        score=score,
        created_at=at,
        valid_from=at,
        valid_to=None,
        superseded_at=None,
        supersedes_id=None,
        superseded_by_id=None,
        last_reinforced_at=at,
        last_used_at=None,
    )


def test_rank_puts_relevance_first_then_trust_and_recency() -> None:
    relevant, trusted, fresh = memory("relevant"), memory("trusted", confidence=1.0), memory("x")
    stale = memory("stale", age_days=90)
    assert rank([(trusted, 0.0), (relevant, 2.0)], NOW)[0] is relevant
    assert rank([(memory("low", confidence=0.5), 0.0), (trusted, 0.0)], NOW)[0] is trusted
    assert rank([(stale, 0.0), (fresh, 0.0)], NOW)[0] is fresh


def test_bound_keeps_whole_memories_within_both_limits() -> None:
    items = [memory("a" * 40), memory("b" * 40), memory("c" * 10)]
    assert [m.content[0] for m in bound(items, limit=10, max_chars=85)] == ["a", "b"]
    assert [m.content[0] for m in bound(items, limit=1, max_chars=1000)] == ["a"]


DISTINCT = Memory(
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
    created_at=NOW,
    valid_from=NOW + timedelta(seconds=1),
    valid_to=NOW + timedelta(seconds=2),
    superseded_at=NOW + timedelta(seconds=3),
    supersedes_id="id-0",
    superseded_by_id="id-2",
    last_reinforced_at=NOW + timedelta(seconds=4),
    last_used_at=NOW + timedelta(seconds=5),
)
"""Every field distinct, so that a value put into the wrong field shows: `Memory.from_row`
and `new_memory` build the record positionally."""


def test_a_row_comes_back_as_the_memory_it_was_made_from() -> None:
    assert Memory.from_row(to_values(DISTINCT)) == DISTINCT


def test_a_candidate_becomes_the_row_its_provenance_says() -> None:
    m = DISTINCT
    candidate = Candidate(
        scope=m.scope,
        kind=Kind.FACT,
        content=m.content,
        key=m.key,
        idempotency_key=m.idempotency_key,
        valid_to=m.valid_to,
        provenance=Provenance(
            Source.OBSERVED,
            reference=m.reference,
            run_id=m.run_id,
            task_id=m.task_id,
            agent=m.agent,
            subagent=m.subagent,
            schedule=m.schedule,
            subject=m.subject,
        ),
    )
    made = new_memory(candidate, Kind.GOAL, Status.ACTIVE, NOW, m.supersedes_id)
    assert made == dataclasses.replace(
        m,
        id=made.id,  # fresh
        kind=Kind.GOAL,
        status=Status.ACTIVE,
        source=Source.OBSERVED,
        confidence=0.8,  # the source's
        version=1,
        score=1.0,
        created_at=NOW,
        valid_from=NOW,
        superseded_at=None,
        superseded_by_id=None,
        last_reinforced_at=NOW,
        last_used_at=None,
    )
    assert made.id != m.id
