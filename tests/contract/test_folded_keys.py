"""Keys are one slot however they are spelled, on every backend: supersession, the
rule that a statement beats an inference, review, history and the goal record all
match the folded key (`memory.folding.folded_key`); the key shown is as written."""

from __future__ import annotations

import pytest

from memory.goals import GOAL_KEY, read_goal_record
from memory.receipts import Outcome
from memory.records import Kind, Source, Status
from memory.store import Store
from tests.clock import Clock
from tests.contract.build import ANA, candidate

SPELLINGS = [
    pytest.param("Diet", id="capital"),
    pytest.param("diet ", id="trailing-space"),
    pytest.param("DIET", id="upper"),
    pytest.param("di\u200bet", id="zero-width"),
    pytest.param("ｄｉｅｔ", id="full-width"),
]


def _state(store: Store, key: str = "diet") -> None:
    store.apply(
        [candidate("vegetarian", key=key, source=Source.STATED)],
        handle="stated",
        actor="writer",
    )


@pytest.mark.parametrize("spelling", SPELLINGS)
def test_an_agents_value_on_any_spelling_waits_behind_the_statement(
    store: Store, spelling: str
) -> None:
    _state(store)
    receipt = store.apply(
        [candidate("eats fish", key=spelling, source=Source.OBSERVED, task="run-2")],
        handle="observed",
        actor="writer",
    )
    [decision] = receipt.decisions
    assert (decision.outcome, decision.rule) == (Outcome.REVIEW, "stated-beats-inferred")
    assert [(m.content, m.key) for m in store.show(ANA)] == [("vegetarian", "diet")]
    [pending] = store.pending_review(ANA)
    assert (pending.content, pending.key) == ("eats fish", spelling)


def test_decomposed_and_composed_spellings_are_one_slot(store: Store) -> None:
    _state(store, key="di\u00e9t")  # "diét", composed
    receipt = store.apply(
        [candidate("eats fish", key="DIE\u0301T", source=Source.OBSERVED, task="run-2")],
        handle="observed",
        actor="writer",
    )
    assert receipt.decisions[0].outcome is Outcome.REVIEW


def test_a_correction_spelled_otherwise_supersedes(store: Store, clock: Clock) -> None:
    _state(store)
    clock.advance(days=1)
    receipt = store.apply(
        [candidate("vegan", key="DIET ", source=Source.STATED, task="run-2")],
        handle="corrected",
        actor="writer",
    )
    [decision] = receipt.decisions
    assert decision.outcome is Outcome.SUPERSEDED
    assert [(m.content, m.key) for m in store.show(ANA)] == [("vegan", "DIET ")]
    for spelling in ("diet", "DIET ", "Diet", "ｄｉｅｔ"):
        old, new = store.history(ANA, spelling)
        assert (old.content, old.status, new.content) == ("vegetarian", Status.SUPERSEDED, "vegan")
        assert old.superseded_by_id == new.id and new.supersedes_id == old.id


def test_an_approved_review_supersedes_the_value_spelled_otherwise(store: Store) -> None:
    _state(store)
    store.apply(
        [candidate("eats fish", key="Diet", source=Source.OBSERVED, task="run-2")],
        handle="observed",
        actor="writer",
    )
    [pending] = store.pending_review(ANA)
    approved = store.review(ANA, pending.id, approve=True, actor="operator", reason="asked")
    [old, new] = store.history(ANA, "diet")
    assert approved.supersedes_id == old.id and old.status is Status.SUPERSEDED
    assert [m.content for m in store.show(ANA)] == ["eats fish"] == [new.content]


def test_one_batch_matches_its_own_spellings(store: Store) -> None:
    receipt = store.apply(
        [
            candidate("vegetarian", key="diet", source=Source.STATED),
            candidate("vegan", key=" Diet", source=Source.STATED, task="run-2"),
        ],
        handle="both",
        actor="writer",
    )
    assert [d.outcome for d in receipt.decisions] == [Outcome.STORED, Outcome.SUPERSEDED]
    assert [m.content for m in store.show(ANA)] == ["vegan"]


def test_idempotency_keys_stay_exact(store: Store) -> None:
    receipt = store.apply(
        [
            candidate("likes tea", key="drink", idempotency_key="Run-1:x"),
            candidate("likes jazz", key="music", idempotency_key="run-1:x"),
        ],
        handle="h",
        actor="writer",
    )
    assert [d.outcome for d in receipt.decisions] == [Outcome.STORED, Outcome.STORED]


def test_the_goal_key_is_reserved_in_every_spelling(store: Store) -> None:
    receipt = store.apply(
        [candidate("ship the release", key="Goal ", source=Source.OBSERVED)],
        handle="h",
        actor="writer",
    )
    [decision] = receipt.decisions
    assert (decision.outcome, decision.rule) == (Outcome.REFUSED, "goal-key-reserved")
    store.apply(
        [candidate("ship it", key="GOAL", kind=Kind.GOAL, source=Source.OPERATOR)],
        handle="g",
        actor="writer",
    )
    record = read_goal_record(store, ANA)
    assert record is not None and record.content == "ship it" and record.key != GOAL_KEY
