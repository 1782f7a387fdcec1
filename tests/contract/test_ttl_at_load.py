"""TTLs per kind and per layer hold at load time, on every backend, before any expire pass.

A memory's TTL runs from its last reinforcement. Load and search must apply the
store's configured TTL (not the 90-day default) the moment it runs out, longer
TTLs included; nothing here runs the `expire` maintenance job.
"""

from __future__ import annotations

import pytest

from memory.expiry import TtlConfig
from memory.receipts import Outcome
from memory.records import Kind, Layer, Scope, Source
from memory.store import LoadBounds, Store
from tests.clock import Clock
from tests.contract.build import ANA, candidate

SHARED = Scope("acme", "ana")
EVERYTHING = LoadBounds(limit=50, max_chars=100_000)


def with_ttl(store: Store, spec: str) -> Store:
    """The same memories and clock, read with the TTL configuration `spec`."""
    return Store(store.engine, clock=store.clock, backend=store.backend, ttl=TtlConfig.parse(spec))


def remember(store: Store, *items: tuple[str, Kind, Scope]) -> None:
    """Store `(content, kind, scope)` items now, as the person (the operator for the tenant)."""
    receipt = store.apply(
        [
            candidate(
                content,
                kind=kind,
                scope=scope,
                source=Source.OPERATOR if scope.layer is Layer.TENANT else Source.STATED,
                task=content,
            )
            for content, kind, scope in items
        ],
        handle=f"h-{items[0][0]}",
        actor="writer",
    )
    assert [d.outcome for d in receipt.decisions] == [Outcome.STORED] * len(items)


def loaded(store: Store, goal: str = "") -> set[str]:
    result = store.load(ANA, goal=goal, bounds=EVERYTHING)
    return {m.content for m in (*result.hot, *result.ranked)}


def searched(store: Store, query: str) -> set[str]:
    return {m.content for m, _ in store.search(ANA, query, limit=50)}


@pytest.mark.parametrize("goal", ["", "renewal"])  # the load's two statements
def test_a_shorter_kind_ttl_stops_loading_at_once(store: Store, clock: Clock, goal: str) -> None:
    remember(
        store,
        ("renewal episode", Kind.EPISODE, ANA),
        ("renewal fact", Kind.FACT, ANA),
        ("renewal preference", Kind.PREFERENCE, ANA),
    )
    clock.advance(days=31)
    short = with_ttl(store, "default=90;episode=30")
    assert loaded(short, goal) == {"renewal fact", "renewal preference"}
    assert searched(short, "renewal") == {"renewal fact", "renewal preference"}
    # The same rows under the default TTL, in the same process (statements are per config).
    assert loaded(store, goal) == {"renewal episode", "renewal fact", "renewal preference"}


def test_the_ttl_boundary_is_the_same_on_every_backend(store: Store, clock: Clock) -> None:
    remember(store, ("renewal episode", Kind.EPISODE, ANA))
    short = with_ttl(store, "episode=30")
    clock.advance(days=30)  # exactly the TTL: still loadable
    assert loaded(short) == {"renewal episode"}
    clock.advance(seconds=1)
    assert loaded(short) == set()
    assert searched(short, "renewal") == set()


def test_a_longer_layer_and_kind_ttl_keeps_loading(store: Store, clock: Clock) -> None:
    remember(
        store,
        ("renewal private fact", Kind.FACT, ANA),
        ("renewal shared fact", Kind.FACT, SHARED),
        ("renewal private episode", Kind.EPISODE, ANA),
    )
    clock.advance(days=100)
    longer = with_ttl(store, "private/fact=120")
    assert loaded(longer) == {"renewal private fact"}  # shared facts and episodes: 90
    assert loaded(longer, "renewal") == {"renewal private fact"}
    assert searched(longer, "renewal") == {"renewal private fact"}
    assert loaded(store) == set()
    clock.advance(days=21)  # 121 days
    assert loaded(longer) == set()


def test_a_longer_default_keeps_loading_past_ninety_days(store: Store, clock: Clock) -> None:
    remember(
        store,
        ("renewal fact", Kind.FACT, ANA),
        ("renewal instruction", Kind.INSTRUCTION, SHARED),
        ("renewal episode", Kind.EPISODE, ANA),
    )
    clock.advance(days=100)
    everything = {"renewal fact", "renewal instruction", "renewal episode"}
    longer = with_ttl(store, "default=120")
    assert loaded(longer) == everything
    assert loaded(longer, "renewal") == everything
    assert searched(longer, "renewal") == everything
    assert loaded(with_ttl(store, "default=120;episode=60")) == everything - {"renewal episode"}
    assert loaded(store) == set()  # the default, 90 days


def test_layer_ttls_apply_to_hot_kinds_too(store: Store, clock: Clock) -> None:
    remember(
        store,
        ("renewal private instruction", Kind.INSTRUCTION, ANA),
        ("renewal shared preference", Kind.PREFERENCE, SHARED),
        ("renewal tenant goal", Kind.GOAL, Scope("acme")),
    )
    clock.advance(days=15)
    ttl = with_ttl(store, "shared=14;tenant=180;private/instruction=7")
    assert loaded(ttl) == {"renewal tenant goal"}
    assert loaded(ttl, "renewal") == {"renewal tenant goal"}
