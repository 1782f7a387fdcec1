"""`RunContext.vote` as an agent meets it: no I/O, an in-memory searcher and reader."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory.records import Kind, Memory, Scope, Source, Status
from workers.agents import RunContext, Trigger, VoteRefused

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
ANA = Scope("acme", "ana", "triage")


def memory(memory_id: str, source: Source, scope: Scope = ANA) -> Memory:
    return Memory(
        id=memory_id,
        scope=scope,
        kind=Kind.FACT,
        content=f"content of {memory_id}",
        key="",
        status=Status.ACTIVE,
        source=source,
        confidence=0.8,
        reference="",
        run_id="",
        task_id="",
        agent="",
        subagent="",
        schedule="",
        subject="",
        idempotency_key=memory_id,
        version=1,
        score=1.0,
        created_at=NOW,
        valid_from=NOW,
        valid_to=None,
        superseded_at=None,
        supersedes_id=None,
        superseded_by_id=None,
        last_reinforced_at=NOW,
        last_used_at=None,
    )


LOADED = memory("loaded", Source.OBSERVED)
SAID = memory("said", Source.STATED)
COLD = memory("cold", Source.OBSERVED)
READ = memory("read", Source.INFERRED)


def context() -> RunContext:
    return RunContext(
        run_key="voter@1",
        agent="voter",
        scope=ANA,
        goal="",
        trigger=Trigger("manual", "api", None, {}),
        memories=(LOADED, SAID),
        sandbox=Path("/nonexistent"),
        searcher=lambda query, limit: [COLD] if "cold" in query else [],
        reader=lambda memory_id: READ if memory_id == "read" else None,
    )


def test_a_vote_on_a_memory_the_run_was_not_given_is_refused_and_not_recorded() -> None:
    ctx = context()
    with pytest.raises(VoteRefused, match="memory victim-id was not given to this run"):
        ctx.vote("victim-id", "down")
    with pytest.raises(VoteRefused, match="not given"):
        ctx.vote("cold", "up")  # exists, but the run has not searched for it yet
    assert ctx.votes == []
    assert [r.split(":")[0] for r in ctx.refused_votes] == ["vote down", "vote up"]  # → partial


def test_what_the_run_searched_or_read_on_demand_was_given_too() -> None:
    ctx = context()
    assert ctx.search("cold things") == [COLD]
    assert ctx.read("read") == READ
    assert ctx.read("nope") is None
    ctx.vote("loaded", "up")
    ctx.vote("cold", "down")
    ctx.vote("read", "down")
    assert [(v.memory_id, v.direction) for v in ctx.votes] == [
        ("loaded", "up"),
        ("cold", "down"),
        ("read", "down"),
    ]
    assert ctx.given_ids == ["loaded", "said", "cold", "read"]


def test_an_agent_cannot_down_vote_the_persons_word_but_may_confirm_it() -> None:
    ctx = context()
    with pytest.raises(VoteRefused, match="the person's word"):
        ctx.vote("said", "down")
    ctx.vote("said", "up")
    assert [(v.memory_id, v.direction) for v in ctx.votes] == [("said", "up")]


def test_a_bad_direction_is_still_a_value_error() -> None:
    with pytest.raises(ValueError, match="'up' or 'down'"):
        context().vote("loaded", "sideways")
