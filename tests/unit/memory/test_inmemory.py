"""The in-memory backend's staging: a batch's copy shares the scopes it does not
change, so a failed batch must leave every scope, index and receipt as it was."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.policy import AgentRules
from memory.port import ApplyOp, EditOp, EditRefused
from memory.records import Candidate, Kind, Provenance, Scope, Source, Status
from memory.store import Store

ANA = Scope("acme", "ana", "triage")
BEN = Scope("acme", "ben", "triage")
NOW = datetime(2026, 12, 4, 9, 0, tzinfo=UTC)


def stated(scope: Scope, content: str, *, key: str = "", task: str = "t1") -> Candidate:
    return Candidate(
        scope=scope,
        kind=Kind.FACT,
        content=content,
        key=key,
        provenance=Provenance(Source.STATED, task_id=task, agent="triage"),
    )


def test_a_failed_batch_leaves_every_scope_as_it_was() -> None:
    store = Store.in_memory(clock=lambda: NOW)
    first = store.apply(
        [stated(ANA, "Ana's plan is Pro", key="plan"), stated(BEN, "Ben is in Oslo")],
        handle="h1",
        actor="writer",
    )
    [plan, _] = first.decisions
    second = (
        stated(ANA, "Ana's plan is Team", key="plan", task="t2"),
        stated(BEN, "Ben moved to Bergen", task="t2"),
    )
    doomed = [
        ApplyOp(second, "h2", "writer", lambda agent: AgentRules.default(), NOW),
        EditOp(ANA.readable(), plan.memory_id, 99, "stale", "operator", "", False, NOW),
    ]

    with pytest.raises(EditRefused):  # the apply superseded the row the edit names
        store.backend.batch(doomed)

    [ana] = store.show(ANA, all_statuses=True)
    assert (ana.content, ana.status, ana.version) == ("Ana's plan is Pro", Status.ACTIVE, 1)
    assert [m.content for m in store.show(BEN, all_statuses=True)] == ["Ben is in Oslo"]
    assert store.receipt("h2") is None
    # The failed batch's idempotency keys were not kept: the same writes apply now.
    again = store.apply(second, handle="h2", actor="writer")
    assert [d.outcome.value for d in again.decisions] == ["superseded", "stored"]
    assert [m.content for m in store.history(ANA, "plan")] == [
        "Ana's plan is Pro",
        "Ana's plan is Team",
    ]


def test_rows_are_found_by_id_and_idempotency_key_only_in_readable_scopes() -> None:
    store = Store.in_memory(clock=lambda: NOW)
    receipt = store.apply([stated(ANA, "Ana likes tea")], handle="h1", actor="writer")
    [decision] = receipt.decisions
    assert [m.content for m in store.get(ANA, [decision.memory_id])] == ["Ana likes tea"]
    assert store.get(BEN, [decision.memory_id]) == []
    replay = store.apply([stated(ANA, "Ana likes tea")], handle="h2", actor="writer")
    assert replay.decisions[0].outcome.value == "duplicate"
    assert replay.decisions[0].memory_id == decision.memory_id
