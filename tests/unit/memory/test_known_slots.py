"""`KnownSlots`: what a writer remembers of its slots, bounded, and what it must forget."""

from __future__ import annotations

from datetime import UTC, datetime

from memory.known_slots import KnownSlots
from memory.records import Candidate, Kind, Memory, Provenance, Scope, Source, Status
from memory.writing import new_memory

ANA = Scope("acme", "ana", "triage")
BOB = Scope("acme", "bob", "triage")
NOW = datetime(2026, 12, 7, tzinfo=UTC)


def row(scope: Scope, key: str) -> Memory:
    c = Candidate(scope, Kind.FACT, f"{key} value", Provenance(Source.OBSERVED), key=key)
    return new_memory(c, Kind.FACT, Status.ACTIVE, NOW, None)


def test_a_batch_is_recalled_only_when_every_slot_is_known() -> None:
    known = KnownSlots()
    diet = row(ANA, "diet")
    known.learn({(ANA, "diet"): diet, (ANA, "mood"): None})
    assert known.recall([(ANA, "diet"), (ANA, "mood")]) == {
        (ANA, "diet"): diet,
        (ANA, "mood"): None,
    }
    assert known.recall([(ANA, "diet"), (ANA, "city")]) is None
    assert known.recall([]) == {}


def test_a_scope_listed_whole_answers_for_slots_never_written() -> None:
    known = KnownSlots()
    diet = row(ANA, "diet")
    known.learn({}, {ANA: {(ANA, "diet"): diet}, BOB: None})
    assert known.recall([(ANA, "city")]) == {(ANA, "city"): None}
    assert known.recall([(BOB, "city")]) is None  # too crowded to list: never whole
    assert known.to_list([(ANA, "x"), (BOB, "x"), (Scope("acme"), "x")]) == [Scope("acme")]


def test_the_least_recently_used_slot_goes_first_and_its_scope_is_no_longer_whole() -> None:
    known = KnownSlots(capacity=2)
    known.learn({}, {ANA: {(ANA, "a"): row(ANA, "a")}})
    known.learn({(BOB, "b"): None})
    known.learn({(ANA, "a"): row(ANA, "a")})  # used again: now the most recent
    known.learn({(BOB, "c"): None})
    assert len(known) == 2
    assert known.recall([(BOB, "b")]) is None
    assert known.recall([(ANA, "a"), (BOB, "c")]) is not None
    known.learn({(BOB, "d"): None})  # evicts ANA's only slot: ANA is not known whole
    assert known.recall([(ANA, "zzz")]) is None


def test_forgetting_a_slot_forgets_that_its_scope_was_known_whole() -> None:
    known = KnownSlots()
    known.learn({}, {ANA: {}})
    assert known.recall([(ANA, "diet")]) == {(ANA, "diet"): None}
    known.forget([(ANA, "diet")])
    assert known.recall([(ANA, "city")]) is None
    known.learn({(BOB, "x"): None}, {BOB: None})
    known.clear()
    assert len(known) == 0 and known.to_list([(BOB, "x")]) == [BOB]


def test_what_was_learned_too_long_ago_is_read_again_and_dropped() -> None:
    now = [0.0]
    known = KnownSlots(max_age=60, clock=lambda: now[0])
    known.learn({(ANA, "diet"): row(ANA, "diet")}, {BOB: {}})
    now[0] = 59
    known.learn({(ANA, "mood"): None})
    assert known.recall([(ANA, "diet"), (BOB, "x")]) is not None
    now[0] = 61
    assert known.recall([(ANA, "diet")]) is None  # older than a minute: read again
    assert known.recall([(BOB, "x")]) is None
    assert known.recall([(ANA, "mood")]) == {(ANA, "mood"): None}
    assert len(known) == 1  # the old row is gone from memory, not only ignored
