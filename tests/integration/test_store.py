"""The store on real databases: the writer's apply path and every read path."""

from __future__ import annotations

from datetime import timedelta

import pytest

from memory.loading import Loaded
from memory.receipts import Outcome
from memory.records import Candidate, Kind, Provenance, Scope, Source, Status
from memory.store import LoadBounds, Store
from tests.clock import Clock

pytestmark = pytest.mark.integration

ANA = Scope("acme", "ana", "triage")


def fact(
    content: str,
    *,
    scope: Scope = ANA,
    key: str = "",
    source: Source = Source.OBSERVED,
    task: str = "run-1",
    kind: Kind = Kind.FACT,
) -> Candidate:
    return Candidate(
        scope=scope,
        kind=kind,
        content=content,
        key=key,
        provenance=Provenance(
            source=source, task_id=task, run_id=task, agent="triage", reference="feed#1"
        ),
    )


def test_apply_stores_and_receipt_is_pollable(store: Store) -> None:
    receipt = store.apply([fact("db-primary disk is 91% full")], handle="h1", actor="writer")
    assert [d.outcome for d in receipt.decisions] == [Outcome.STORED]
    assert store.receipt("h1") == receipt
    [memory] = store.show(ANA)
    assert memory.content == "db-primary disk is 91% full"
    assert memory.source is Source.OBSERVED and memory.reference == "feed#1"


def test_same_handle_or_same_task_twice_is_stored_once(store: Store) -> None:
    candidate = fact("billing-api error rate 1.2%")
    first = store.apply([candidate], handle="h1", actor="writer")
    assert store.apply([candidate], handle="h1", actor="writer") == first
    again = store.apply([candidate], handle="h2", actor="writer")
    assert again.decisions[0].outcome is Outcome.DUPLICATE
    assert len(store.show(ANA)) == 1


def test_new_fact_for_key_supersedes_with_history(store: Store, clock: Clock) -> None:
    store.apply(
        [fact("renewal on 2027-01-01", key="renewal", source=Source.STATED)],
        handle="h1",
        actor="writer",
    )
    clock.advance(days=1)
    receipt = store.apply(
        [fact("renewal on 2027-02-01", key="renewal", source=Source.STATED, task="run-2")],
        handle="h2",
        actor="writer",
    )
    decision = receipt.decisions[0]
    assert decision.outcome is Outcome.SUPERSEDED
    old, new = store.history(ANA, "renewal")
    assert (old.status, new.status) == (Status.SUPERSEDED, Status.ACTIVE)
    assert old.superseded_by_id == new.id and new.supersedes_id == old.id
    assert old.valid_to == clock.now and new.valid_from == clock.now
    assert [m.content for m in store.show(ANA)] == ["renewal on 2027-02-01"]


def test_person_statement_is_not_superseded_by_an_inference(store: Store) -> None:
    store.apply(
        [fact("prefers email", key="contact", source=Source.STATED)], handle="h1", actor="writer"
    )
    receipt = store.apply(
        [fact("prefers phone", key="contact", source=Source.OBSERVED, task="run-2")],
        handle="h2",
        actor="writer",
    )
    assert receipt.decisions[0].outcome is Outcome.REVIEW
    assert [m.content for m in store.show(ANA)] == ["prefers email"]


def test_secret_is_refused_and_appears_nowhere(store: Store) -> None:
    receipt = store.apply([fact("card 4111 1111 1111 1111 exp 12/29")], handle="h1", actor="writer")
    assert receipt.decisions[0].outcome is Outcome.REFUSED
    assert "4111" not in str(receipt.to_json())
    assert store.show(ANA, all_statuses=True) == []


def test_reads_never_go_sideways_or_down(store: Store) -> None:
    bob = Scope("acme", "bob", "triage")
    other_agent = Scope("acme", "ana", "billing")
    store.apply(
        [
            fact("ana private", scope=ANA, task="a"),
            fact("bob private", scope=bob, task="b"),
            fact("ana billing private", scope=other_agent, task="c"),
            fact("ana shared", scope=Scope("acme", "ana"), task="d", source=Source.STATED),
            fact("tenant wide", scope=Scope("acme"), task="e", source=Source.OPERATOR),
        ],
        handle="h1",
        actor="writer",
    )
    seen = {m.content for m in store.show(ANA)}
    assert seen == {"ana private", "ana shared", "tenant wide"}
    assert {m.content for m in store.show(Scope("acme"))} == {"tenant wide"}
    loaded = store.load(ANA, goal="private shared tenant")
    assert {m.content for m in (*loaded.hot, *loaded.ranked)} == seen


def test_load_ranks_by_goal_and_respects_bounds(store: Store) -> None:
    store.apply(
        [fact(f"incident {i} on search cluster", task=f"t{i}") for i in range(10)]
        + [fact("replication lag on db-primary", task="db")],
        handle="h",
        actor="writer",
    )
    loaded = store.load(ANA, goal="database replication lag", bounds=LoadBounds(limit=3))
    assert len(loaded) == 3
    assert loaded.ranked[0].content == "replication lag on db-primary"
    tight = store.load(ANA, goal="", bounds=LoadBounds(limit=50, max_chars=60))
    assert sum(len(m.content) for m in tight.ranked) <= 60


def test_load_excludes_expired_and_pending(store: Store, clock: Clock) -> None:
    store.apply(
        [
            Candidate(
                scope=ANA,
                kind=Kind.FACT,
                content="maintenance window tonight",
                valid_to=clock.now + timedelta(hours=1),
                provenance=Provenance(source=Source.OPERATOR, task_id="t1"),
            ),
            fact("maybe prefers mornings", source=Source.INFERRED, task="t2"),
        ],
        handle="h",
        actor="writer",
    )
    assert [m.content for m in _all(store.load(ANA))] == ["maintenance window tonight"]
    clock.advance(hours=2)
    assert _all(store.load(ANA)) == []


def test_search_finds_by_words_within_scope(store: Store) -> None:
    store.apply(
        [
            fact("webhook retries piling up", task="a"),
            fact("webhook secret rotated", scope=Scope("acme", "bob", "triage"), task="b"),
        ],
        handle="h",
        actor="writer",
    )
    hits = store.search(ANA, "webhooks retry")
    assert [m.content for m, _ in hits] == ["webhook retries piling up"]


def _all(loaded: Loaded) -> list:
    return [*loaded.hot, *loaded.ranked]


def test_same_key_same_value_from_another_run_is_a_duplicate(store: Store) -> None:
    store.apply([fact("INC-1 seen", key="incident.1")], handle="h1", actor="writer")
    receipt = store.apply(
        [fact("INC-1 seen", key="incident.1", task="run-2")], handle="h2", actor="writer"
    )
    assert receipt.decisions[0].outcome is Outcome.DUPLICATE
    assert len(store.history(ANA, "incident.1")) == 1
