"""`checked_result`: what an agent hands back is an `AgentResult`, or the run fails at once."""

from __future__ import annotations

import re

import pytest

from memory.records import Candidate, Kind, Provenance, Scope, Source
from workers.agents import AgentResult, AgentResultError, checked_result

A_CANDIDATE = Candidate(
    scope=Scope("acme", "ana", "triage"),
    kind=Kind.FACT,
    content="the customer prefers email",
    provenance=Provenance(source=Source.INFERRED),
)


def test_none_is_the_empty_result_and_a_result_is_itself() -> None:
    assert checked_result(None) == AgentResult()
    result = AgentResult(summary="done", candidates=[A_CANDIDATE], problems=("one refused",))
    assert checked_result(result) is result


@pytest.mark.parametrize(
    ("returned", "says"),
    [
        ({"summary": "done"}, "the agent returned a dict where an AgentResult"),
        ({}, "the agent returned a dict where an AgentResult"),
        ("done", "the agent returned a str where an AgentResult"),
        (AgentResult(summary=None), "AgentResult.summary is None, not text"),  # type: ignore[arg-type]
        (AgentResult(tried=3), "AgentResult.tried is an int, not text"),  # type: ignore[arg-type]
        (
            AgentResult(candidates=[A_CANDIDATE, {"content": "x"}]),  # type: ignore[list-item]
            "AgentResult.candidates[1] is a dict, not a Candidate",
        ),
        (AgentResult(problems=[None]), "AgentResult.problems[0] is None, not text"),  # type: ignore[list-item]
    ],
)
def test_anything_else_is_refused_naming_what_it_was(returned: object, says: str) -> None:
    with pytest.raises(AgentResultError, match=re.escape(says)):
        checked_result(returned)
