"""The write gate accepts ordinary observed facts (`ordinary_facts.ORDINARY_FACTS`):
a detector widened to catch an attack must not refuse what agents see every day."""

from __future__ import annotations

import pytest

from memory.phrasing import looks_like_plan
from memory.policy import Action, AgentRules, judge
from memory.records import Candidate, Kind, Provenance, Scope, Source
from tests.unit.memory.ordinary_facts import LEFT_REFUSED, ORDINARY_FACTS

SCOPE = Scope("acme", "ana", "triage")
CASES = [(kind, text) for kind, texts in ORDINARY_FACTS.items() for text in texts]


def observed(text: str) -> Candidate:
    return Candidate(SCOPE, Kind.FACT, text, Provenance(Source.OBSERVED))


@pytest.mark.parametrize(
    ("kind", "text"), CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CASES)]
)
def test_an_ordinary_observed_fact_is_accepted(kind: str, text: str) -> None:
    verdict = judge(observed(text), AgentRules.default())
    assert verdict.action is Action.ACCEPT, (verdict.rule, verdict.reason)
    # A plan seen in content is kept as what was seen, an episode (`memory.policy`).
    expected = ("goal-source", Kind.EPISODE) if looks_like_plan(text) else ("ok", Kind.FACT)
    assert (verdict.rule, verdict.kind) == expected


@pytest.mark.parametrize(("text", "rule"), [(t, r) for t, (r, _) in LEFT_REFUSED.items()])
def test_what_is_left_refused_is_refused_by_its_rule(text: str, rule: str) -> None:
    verdict = judge(observed(text), AgentRules.default())
    assert (verdict.action, verdict.rule) == (Action.REFUSE, rule)


def test_the_corpus_is_a_few_hundred_facts_of_every_kind() -> None:
    assert len(CASES) >= 350
    assert all(len(texts) >= 10 for texts in ORDINARY_FACTS.values())
