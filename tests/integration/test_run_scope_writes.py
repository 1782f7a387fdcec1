"""A run proposes memory only in its own tenant and as its own agent (no broker).

An agent built in Python can make `Candidate`s by hand; the run keeps only those of
its tenant and agent, and names the rest in its error (it ends `partial`). Real
SQLite and PostgreSQL; the writer is `tests.integration.test_adapters.Writer`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from memory.records import Candidate, Kind, Provenance, Scope, Source
from tests.integration.test_adapters import make_rt, run_once
from workers.agents import AgentResult, RunContext
from workers.runtime import Runtime

pytestmark = pytest.mark.integration
__all__ = ["make_rt"]  # the fixture


def trespasser(ctx: RunContext) -> AgentResult:
    """One note of its own, then three built by hand to land where it may not."""
    ctx.remember("queue depth is 12", source="observed", reference="q#1", layer="shared")
    own = ctx.candidates[-1]

    def elsewhere(scope: Scope, agent: str, content: str) -> Candidate:
        provenance = dataclasses.replace(own.provenance, agent=agent)
        return Candidate(scope, Kind.FACT, content, provenance, key="note")

    return AgentResult(
        summary="wrote four",
        candidates=[
            elsewhere(Scope("globex", "ana", "trespasser"), "trespasser", "in another tenant"),
            elsewhere(Scope("acme", "", "announcer"), "trespasser", "in another agent's layer"),
            elsewhere(Scope("acme", "", ""), "announcer", "with another agent's rights"),
            Candidate(  # no writer named: the run's own; another run's id: this run's
                Scope("acme", "ana", ""),
                Kind.FACT,
                "Ana likes tea",
                Provenance(Source.OBSERVED, run_id="someone-elses@1"),
            ),
        ],
    )


@pytest.fixture
def rt(make_rt: Callable[..., Runtime]) -> Runtime:
    return make_rt({"trespasser": "tests.integration.test_run_scope_writes:trespasser"})


def test_candidates_outside_the_runs_tenant_or_agent_are_named_and_not_sent(rt: Runtime) -> None:
    outcome, writer = run_once(rt, "trespasser")
    assert outcome.status == "partial"
    assert "candidate 1 not kept: its scope is in tenant 'globex'" in outcome.error
    assert "candidate 2 not kept: its scope is agent 'announcer''s" in outcome.error
    assert "candidate 3 not kept: it names agent 'announcer' as its writer" in outcome.error
    sent = writer.candidates()
    assert [c["content"] for c in sent] == ["queue depth is 12", "Ana likes tea"]
    assert {c["provenance"]["agent"] for c in sent} == {"trespasser"}
    assert {c["provenance"]["run_id"] for c in sent} == {"trespasser@1"}
    assert rt.store.show(Scope("globex", "ana", "trespasser"), all_statuses=True) == []
