"""What the LangGraph adapter adds or does differently, on SQLite and PostgreSQL.

Supersession kept as history, deletes that retire rather than erase, scope
isolation, TTL with refresh on read under an injected clock, the write gate,
full-text `query` ranking — each asserted through nightshift's own API too, and,
where LangGraph's `InMemoryStore` behaves differently, that difference explicitly.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import timedelta

import pytest

from memory.expiry import expire, purgeable_clause
from memory.forgetting import Requester, Selector, delete_where, forget
from memory.records import Scope, Source, Status
from memory.store import Store
from tests.clock import Clock
from tests.integration.langgraph_store_fixtures import ANA, BOB, adapter, nightshift_store
from workers.maintenance import run_job

from langgraph.store.base import PutOp, TTLConfig  # isort: skip
from langgraph.store.memory import InMemoryStore  # isort: skip
from memory.langgraph import NightshiftStore, PutRefused, ScanBoundExceeded  # isort: skip
from memory.langgraph.encoding import memory_key  # isort: skip

pytestmark = pytest.mark.integration


@pytest.fixture
def store(database_url: str, clock: Clock) -> Iterator[Store]:
    with nightshift_store(database_url, clock) as store:
        yield store


@pytest.fixture
def lg(store: Store) -> NightshiftStore:
    return adapter(store)


def test_overwrite_supersedes_and_history_keeps_every_value(
    lg: NightshiftStore, store: Store, clock: Clock
) -> None:
    lg.put(("users", "ana"), "prefs", {"theme": "light"})
    first_put = clock.now
    clock.advance(minutes=5)
    lg.put(("users", "ana"), "prefs", {"theme": "dark"})
    item = lg.get(("users", "ana"), "prefs")
    assert item is not None and item.value == {"theme": "dark"}
    # created_at survives an overwrite (as in PostgresStore; InMemoryStore resets it).
    assert (item.created_at, item.updated_at) == (first_put, clock.now)
    old, new = store.history(ANA, memory_key(("users", "ana"), "prefs"))
    assert [old.content, new.content] == ['{"theme":"light"}', '{"theme":"dark"}']
    assert old.status is Status.SUPERSEDED and old.superseded_by_id == new.id
    assert new.supersedes_id == old.id and new.source is Source.OPERATOR
    assert new.reference.startswith("langgraph:") and new.run_id == "thread-1"
    [shown] = [m for m in store.show(ANA) if m.key == new.key]
    assert shown.id == new.id


def test_writing_the_same_value_adds_no_row(lg: NightshiftStore, store: Store) -> None:
    lg.put(("n",), "k", {"v": 1})
    lg.put(("n",), "k", {"v": 1})
    assert len(store.history(ANA, memory_key(("n",), "k"))) == 1


def test_delete_retires_keeps_history_and_audits(
    lg: NightshiftStore, store: Store, clock: Clock
) -> None:
    lg.put(("docs",), "a", {"text": "hello"})
    clock.advance(minutes=1)
    lg.delete(("docs",), "a")
    [row] = store.history(ANA, memory_key(("docs",), "a"))
    assert row.status is Status.EXPIRED and row.valid_to == clock.now
    assert [e.action for e in store.audit("acme", row.id)][-1] == "langgraph.delete"
    assert row.key not in {m.key for m in store.show(ANA)}
    clock.advance(minutes=1)
    lg.put(("docs",), "a", {"text": "back"})
    item = lg.get(("docs",), "a")
    assert item is not None and item.created_at == clock.now  # a new item, not a revival


def test_another_scope_sees_nothing(store: Store) -> None:
    ana, bob = adapter(store, ANA), adapter(store, BOB)
    other_agent = adapter(store, Scope("acme", "ana", "billing"))
    tenant_wide = adapter(store, Scope("acme"))
    ana.put(("memories",), "m1", {"text": "ana's renewal is in March"})
    for reader in (bob, other_agent, tenant_wide):
        assert reader.get(("memories",), "m1") is None
        assert reader.search(("memories",)) == []
        assert reader.search(("memories",), query="renewal march") == []
        assert reader.list_namespaces() == []
    bob.put(("memories",), "m1", {"text": "bob's own"})
    assert ana.get(("memories",), "m1").value == {"text": "ana's renewal is in March"}  # type: ignore[union-attr]
    assert bob.get(("memories",), "m1").value == {"text": "bob's own"}  # type: ignore[union-attr]
    assert [m.scope for m in store.show(BOB)] == [BOB]


def test_ttl_expires_and_reads_refresh_it(lg: NightshiftStore, clock: Clock) -> None:
    lg.put(("cache",), "a", {"v": 1}, ttl=10)
    lg.put(("cache",), "b", {"v": 2}, ttl=10)
    lg.put(("cache",), "forever", {"v": 3})
    clock.advance(minutes=9)
    assert lg.get(("cache",), "a") is not None  # refreshes a: now + 10 min
    assert [i.key for i in lg.search(("cache",), filter={"v": 2}, refresh_ttl=False)] == ["b"]
    clock.advance(minutes=2)  # 11 min after the puts, 2 after the refresh
    assert lg.get(("cache",), "a", refresh_ttl=False) is not None
    assert lg.get(("cache",), "b") is None
    assert {i.key for i in lg.search(("cache",))} == {"a", "forever"}  # search refreshes a too
    clock.advance(minutes=9, seconds=59)
    assert lg.get(("cache",), "a", refresh_ttl=False) is not None
    clock.advance(seconds=1)
    assert lg.get(("cache",), "a") is None
    assert lg.list_namespaces() == [("cache",)]  # "forever" keeps the namespace
    clock.advance(days=30)
    assert lg.get(("cache",), "forever") is not None


def test_ttl_config_default_and_refresh_on_read(store: Store, clock: Clock) -> None:
    lg = adapter(store, ttl=TTLConfig(default_ttl=5, refresh_on_read=False))
    lg.put(("s",), "k", {"v": 1})  # default_ttl applies
    lg.put(("s",), "keep", {"v": 2}, ttl=None)  # an explicit None means no TTL
    clock.advance(minutes=4)
    assert lg.get(("s",), "k") is not None  # no refresh: refresh_on_read is off
    assert lg.get(("s",), "k", refresh_ttl=True) is not None  # explicit refresh wins
    clock.advance(minutes=4)
    assert lg.get(("s",), "k") is not None
    clock.advance(minutes=2)
    assert lg.get(("s",), "k") is None and lg.get(("s",), "keep") is not None


def test_putting_the_same_value_again_resets_its_ttl(lg: NightshiftStore, clock: Clock) -> None:
    lg.put(("t",), "k", {"v": 1}, ttl=1)
    lg.put(("t",), "k", {"v": 1})  # same value, no TTL now
    clock.advance(minutes=5)
    assert lg.get(("t",), "k") is not None


def test_inmemory_store_has_no_ttl_at_all() -> None:
    with pytest.raises(NotImplementedError, match="TTL is not supported by InMemoryStore"):
        InMemoryStore().put(("a",), "k", {"v": 1}, ttl=5)


def test_query_is_ranked_by_full_text(lg: NightshiftStore, clock: Clock) -> None:
    docs = {
        "both": {"text": "contract renewal: the renewal date moved, renewal terms attached"},
        "one": {"text": "the contract was signed in May"},
        "none": {"text": "lunch menu for Friday"},
        "other": {"text": "renewal of the office lease"},
    }
    for key, value in docs.items():
        clock.advance(seconds=1)
        lg.put(("notes",), key, value)
    found = lg.search(("notes",), query="contract renewal")
    assert found[0].key == "both"
    assert {i.key for i in found} == {"both", "one", "other"}  # "none" matches no word
    scores = [i.score for i in found]
    assert all(s is not None and s > 0 for s in scores)
    assert scores == sorted(scores, reverse=True)  # type: ignore[type-var]
    assert [i.key for i in lg.search(("notes",), query="contract renewal", offset=1, limit=1)] == [
        found[1].key
    ]
    assert [i.key for i in lg.search(("notes",), query="lease", filter={"text": {"$ne": "x"}})] == [
        "other"
    ]
    # No query (or no searchable word): every item, newest first, no score.
    for query in (None, "the"):
        listed = lg.search(("notes",), query=query)
        assert [i.key for i in listed] == ["other", "none", "one", "both"]
        assert {i.score for i in listed} == {None}


def test_inmemory_store_ignores_the_query_without_an_index() -> None:
    plain = InMemoryStore()
    plain.put(("notes",), "lunch", {"text": "lunch menu"})
    plain.put(("notes",), "renewal", {"text": "contract renewal"})
    found = plain.search(("notes",), query="contract renewal")
    assert [i.key for i in found] == ["lunch", "renewal"]  # insertion order, unranked
    assert {i.score for i in found} == {None}


def test_search_without_query_is_newest_first(lg: NightshiftStore, clock: Clock) -> None:
    for key in ("a", "b", "c"):
        clock.advance(seconds=1)
        lg.put(("o",), key, {"k": key})
    clock.advance(seconds=1)
    lg.put(("o",), "a", {"k": "a2"})  # an update moves it to the front
    assert [i.key for i in lg.search(("o",))] == ["a", "c", "b"]
    assert [i.key for i in lg.search(("o",), offset=1, limit=1)] == ["c"]


def test_gate_refusals_raise_naming_the_rule(lg: NightshiftStore, store: Store) -> None:
    with pytest.raises(PutRefused, match="rule 'secret'") as refused:
        lg.batch(
            [
                PutOp(("creds",), "aws", {"key": "AKIAIOSFODNN7EXAMPLE"}),
                PutOp(("notes",), "fine", {"text": "kept"}),
            ]
        )
    [refusal] = refused.value.refusals
    assert (refusal.namespace, refusal.key, refusal.outcome) == (("creds",), "aws", "refused")
    assert lg.get(("creds",), "aws") is None
    assert lg.get(("notes",), "fine") is not None  # the rest of the batch was applied
    receipt = store.receipt(refused.value.handle)
    assert receipt is not None and [d.outcome.value for d in receipt.decisions] == [
        "refused",
        "stored",
    ]


def test_an_agents_inference_is_held_for_review(store: Store) -> None:
    agent = adapter(store, source=Source.INFERRED)
    with pytest.raises(PutRefused, match="held for review by rule 'inferred-below-bar'"):
        agent.put(("guess",), "k", {"text": "ana probably prefers email"})
    assert agent.get(("guess",), "k") is None
    assert [m.status for m in store.pending_review(ANA)] == [Status.PENDING_REVIEW]


def test_a_person_statement_is_not_overwritten_by_an_observation(store: Store) -> None:
    adapter(store, source=Source.STATED).put(("p",), "lang", {"text": "I write in German"})
    with pytest.raises(PutRefused, match="stated-beats-inferred"):
        adapter(store, source=Source.OBSERVED).put(("p",), "lang", {"text": "English"})
    assert adapter(store).get(("p",), "lang").value == {"text": "I write in German"}  # type: ignore[union-attr]


def test_long_paths_are_hashed_and_still_round_trip(lg: NightshiftStore, store: Store) -> None:
    namespace = ("x" * 120, "y" * 120)
    lg.put(namespace, "k" * 50, {"v": 1})
    item = lg.get(namespace, "k" * 50)
    assert item is not None and item.namespace == namespace and item.key == "k" * 50
    assert lg.list_namespaces() == [namespace]
    [row] = store.show(ANA)
    assert row.key.startswith("lg#") and len(row.key) == 67


def test_scan_bound_is_an_error_not_a_short_answer(store: Store) -> None:
    lg = adapter(store, scan_limit=3)
    for i in range(5):
        lg.put(("b",), f"k{i}", {"i": i})
    assert len(lg.search(("b",), limit=2)) == 2  # the newest rows fill the page: exact
    with pytest.raises(ScanBoundExceeded, match="scan_limit"):
        lg.search(("b",), filter={"i": 0})
    with pytest.raises(ScanBoundExceeded, match="scan_limit"):
        lg.list_namespaces()


def test_async_supersession(lg: NightshiftStore, store: Store) -> None:
    async def two_puts() -> None:
        await lg.aput(("a",), "k", {"v": 1})
        await lg.aput(("a",), "k", {"v": 2})

    asyncio.run(two_puts())
    assert [m.status for m in store.history(ANA, memory_key(("a",), "k"))] == [
        Status.SUPERSEDED,
        Status.ACTIVE,
    ]


def test_in_memory_nightshift_store_is_refused_with_a_reason() -> None:
    with pytest.raises(TypeError, match="SQL-backed Store"):
        adapter(Store.in_memory())


def test_maintenance_sweeps_expired_and_deleted_items_for_good(
    lg: NightshiftStore, store: Store, clock: Clock
) -> None:
    lg.put(("c",), "ttl", {"v": 1}, ttl=1)
    lg.put(("c",), "gone", {"v": 2})
    lg.put(("c",), "gone", {"v": 3})
    lg.delete(("c",), "gone")
    clock.advance(minutes=2)
    assert store.engine is not None
    with store.engine.begin() as conn:
        assert expire(conn, clock.now, tenant="acme") == 1  # the TTL item
    ttl_key, gone_key = memory_key(("c",), "ttl"), memory_key(("c",), "gone")
    assert [m.status for m in store.history(ANA, ttl_key)] == [Status.EXPIRED]
    report = delete_where(
        store.engine, "acme", purgeable_clause(clock.now, timedelta(0)), now=clock.now, reason="t"
    )
    # The expired TTL item, and the deleted item with the version it superseded.
    assert report.deleted == 3
    assert store.history(ANA, ttl_key) == [] and store.history(ANA, gone_key) == []


def test_consolidation_keeps_items_that_hold_the_same_value(
    lg: NightshiftStore, store: Store, clock: Clock
) -> None:
    # Each was merged into the oldest as "same-content", and got returned None.
    for key in ("a", "b", "c"):
        lg.put(("flags",), key, {"on": True})
        clock.advance(seconds=1)
    assert store.engine is not None
    summary = run_job(store.engine, "consolidate", now=clock.now)
    assert summary.counts["merged"] == 0
    assert [lg.get(("flags",), key) is not None for key in ("a", "b", "c")] == [True] * 3


def test_forget_erases_an_item_and_its_history(
    lg: NightshiftStore, store: Store, clock: Clock
) -> None:
    lg.put(("p",), "k", {"text": "first"})
    lg.put(("p",), "k", {"text": "second"})
    rows = store.history(ANA, memory_key(("p",), "k"))
    assert store.engine is not None
    forget(
        store.engine,
        Selector.by_ids("acme", [rows[-1].id]),
        Requester.operator(),
        now=clock.now,
        reason="asked",
    )
    assert store.history(ANA, memory_key(("p",), "k")) == []
    assert lg.get(("p",), "k") is None and lg.search(("p",), query="first second") == []


def test_a_put_after_expiry_starts_a_new_item(
    lg: NightshiftStore, store: Store, clock: Clock
) -> None:
    lg.put(("e",), "k", {"v": 1}, ttl=1)
    clock.advance(minutes=2)
    lg.put(("e",), "k", {"v": 1})  # the same value: not a revival of the lapsed row
    item = lg.get(("e",), "k")
    assert item is not None and item.created_at == clock.now
    assert [m.status for m in store.history(ANA, memory_key(("e",), "k"))] == [
        Status.EXPIRED,
        Status.ACTIVE,
    ]
