"""Ana's memory does not reach Bob's runs through the agent layer (no broker).

Real SQLite and PostgreSQL; the writer queue is replaced by applying the submitted
message as the writer task does (`tests.integration.test_adapters.Writer`, through
`workers.writer.apply`). Both people use the same agent, `diarist`; the agent layer,
`(acme, *, diarist)`, is what every one of its runs reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from memory.receipts import Decision
from memory.records import Candidate, Kind, Provenance, Scope, Source, Status
from tests.integration.test_adapters import Writer, make_rt, now
from workers import runs
from workers.agents import AgentResult, RunContext
from workers.lifecycle import execute
from workers.runs import RunRequest, RunStatus
from workers.runtime import Runtime

pytestmark = pytest.mark.integration
__all__ = ["make_rt"]  # the fixture, shared with the adapter tests

AGENT_LAYER = Scope("acme", "", "diarist")
DIAGNOSIS = "Ana's diagnosis is type 2 diabetes"


def diarist(ctx: RunContext) -> AgentResult:
    """Remembers the payload's notes where the payload says; reports what it was given.
    `forge` builds the candidate by hand, claiming a run with no person."""
    for note in ctx.trigger.payload.get("notes", ()):
        layer = str(ctx.trigger.payload.get("layer", "agent"))
        made = ctx.remember(note, source="observed", reference="dm#1", layer=layer)
        if ctx.trigger.payload.get("forge"):
            ctx.candidates[-1] = forged(made)
    return AgentResult(summary=json.dumps([m.content for m in ctx.memories]))


def forged(made: Candidate) -> Candidate:
    """`made`, as a hostile agent would send it: no run, no person, an operator's word."""
    provenance = Provenance(Source.OPERATOR, reference="dm#1", acting_for="")
    return made.replace(provenance=provenance)


@pytest.fixture
def rt(make_rt: Callable[..., Runtime]) -> Runtime:
    return make_rt({"diarist": "tests.integration.test_cross_user_writes:diarist"})


def run_for(rt: Runtime, key: str, user: str, **payload: Any) -> tuple[list[str], Writer]:
    """Run `diarist` for `user` from a private message; what it was given, and the writer."""
    with rt.engine.begin() as conn:
        request = RunRequest(
            key=key,
            agent="diarist",
            tenant="acme",
            user=user,
            goal="diagnosis address",
            trigger_origin="private",
            payload=payload,
        )
        runs.create(conn, [request], now())
    writer = Writer(rt)
    outcome = execute(rt, key, submit=writer, clock=now)
    assert outcome.status == RunStatus.SUCCEEDED.value, outcome.error
    return json.loads(outcome.summary), writer


def decisions(writer: Writer) -> list[Decision]:
    """The decisions on the run's own candidates (not its goal record's batch)."""
    return [d for r in writer.receipts if r.handle.startswith("write:") for d in r.decisions]


def test_a_private_run_for_ana_leaves_nothing_bobs_run_can_load(rt: Runtime) -> None:
    _, writer = run_for(rt, "ana@1", "ana", notes=[DIAGNOSIS])
    [decision] = decisions(writer)
    assert (decision.outcome.value, decision.rule) == ("review", "cross-user-layer")
    bob_was_given, _ = run_for(rt, "bob@1", "bob")
    assert DIAGNOSIS not in bob_was_given
    [waiting] = rt.store.pending_review(AGENT_LAYER)
    assert (waiting.content, waiting.status) == (DIAGNOSIS, Status.PENDING_REVIEW)
    assert waiting.id == decision.memory_id


def test_a_run_cannot_forge_that_it_acted_for_nobody(rt: Runtime) -> None:
    _, writer = run_for(rt, "ana@forge", "ana", notes=[DIAGNOSIS], forge=True)
    [decision] = decisions(writer)
    assert (decision.outcome.value, decision.rule) == ("review", "cross-user-layer")
    bob_was_given, _ = run_for(rt, "bob@forge", "bob")
    assert DIAGNOSIS not in bob_was_given


def test_what_ana_keeps_for_herself_is_still_hers(rt: Runtime) -> None:
    _, writer = run_for(rt, "ana@own", "ana", notes=["Ana's address is 4 Elm Row"], layer="shared")
    [decision] = decisions(writer)
    assert (decision.outcome.value, decision.rule) == ("stored", "ok")
    ana_was_given, _ = run_for(rt, "ana@2", "ana")
    bob_was_given, _ = run_for(rt, "bob@2", "bob")
    assert "Ana's address is 4 Elm Row" in ana_was_given
    assert bob_was_given == []


def test_an_approved_write_reaches_every_user_of_the_agent(rt: Runtime) -> None:
    run_for(rt, "ana@3", "ana", notes=["the clinic moved to Elm Row"])
    [waiting] = rt.store.pending_review(AGENT_LAYER)
    rt.store.review(AGENT_LAYER, waiting.id, approve=True, actor="operator", reason="no PII")
    bob_was_given, _ = run_for(rt, "bob@3", "bob")
    assert "the clinic moved to Elm Row" in bob_was_given


def test_a_tenant_run_with_no_person_writes_the_agent_layer_as_before(rt: Runtime) -> None:
    with rt.engine.begin() as conn:
        request = RunRequest(
            key="cron@1",
            agent="diarist",
            tenant="acme",
            trigger_kind="cron",
            payload={"notes": ["the clinic opens at 8"]},
        )
        runs.create(conn, [request], now())
    writer = Writer(rt)
    assert execute(rt, "cron@1", submit=writer, clock=now).status == "succeeded"
    [decision] = decisions(writer)
    assert (decision.outcome.value, decision.rule) == ("stored", "ok")
    assert [m.kind for m in rt.store.show(AGENT_LAYER)] == [Kind.FACT]
