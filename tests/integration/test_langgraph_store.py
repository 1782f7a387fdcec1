"""The LangGraph adapter against LangGraph's documented store behaviour.

Every test here runs on nightshift over SQLite, nightshift over PostgreSQL, and
LangGraph's own `InMemoryStore`, so "same semantics" is checked, not assumed.
Where nightshift intentionally differs (text ranking, TTL, ordering, created_at on
overwrite) the difference is asserted in test_langgraph_store_nightshift.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.clock import Clock
from tests.integration.langgraph_store_fixtures import any_store

from langgraph.store.memory import InMemoryStore  # isort: skip
from langgraph.store.base import (  # isort: skip
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    ListNamespacesOp,
    PutOp,
    SearchOp,
)

pytestmark = pytest.mark.integration

KINDS = ["nightshift-sqlite", "nightshift-postgresql", "langgraph-inmemory"]


@pytest.fixture(params=KINDS)
def lg(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseStore]:
    with any_store(request.param, tmp_path, Clock()) as store:
        yield store


def keys(items: list[Any]) -> set[str]:
    return {item.key for item in items}


def test_put_get_round_trip(lg: BaseStore) -> None:
    value = {"theme": "dark", "size": 12, "tags": ["a", "b"], "nested": {"x": 1.5, "y": None}}
    lg.put(("users", "ana"), "prefs", value)
    item = lg.get(("users", "ana"), "prefs")
    assert item is not None
    assert (item.namespace, item.key, item.value) == (("users", "ana"), "prefs", value)
    assert item.created_at <= item.updated_at
    assert lg.get(("users", "ana"), "missing") is None
    assert lg.get(("users", "bob"), "prefs") is None


def test_overwrite_returns_the_new_value(lg: BaseStore) -> None:
    lg.put(("users",), "k", {"v": 1})
    lg.put(("users",), "k", {"v": 2})
    item = lg.get(("users",), "k")
    assert item is not None and item.value == {"v": 2}
    assert [i.value for i in lg.search(("users",))] == [{"v": 2}]


def test_delete_removes_and_missing_delete_is_quiet(lg: BaseStore) -> None:
    lg.put(("docs",), "a", {"text": "hello"})
    lg.delete(("docs",), "a")
    lg.delete(("docs",), "never-there")
    assert lg.get(("docs",), "a") is None
    assert lg.search(("docs",)) == []
    # InMemoryStore keeps listing a namespace whose last item was deleted (an empty
    # dict stays behind); PostgresStore and nightshift list namespaces that hold items.
    assert lg.list_namespaces() == ([("docs",)] if isinstance(lg, InMemoryStore) else [])
    lg.put(("docs",), "a", {"text": "again"})
    assert lg.get(("docs",), "a").value == {"text": "again"}  # type: ignore[union-attr]


def test_keys_and_labels_are_taken_literally(lg: BaseStore) -> None:
    odd = [("a/b", "c"), ("a", "b/c"), ("a:b",), ("a", "b:c"), ("%2F",), ("ü", "✓")]
    for i, namespace in enumerate(odd):
        lg.put(namespace, f"k/{i}:%", {"i": i})
    for i, namespace in enumerate(odd):
        item = lg.get(namespace, f"k/{i}:%")
        assert item is not None and item.value == {"i": i} and item.namespace == namespace
    assert sorted(lg.list_namespaces()) == sorted(odd)


@pytest.mark.parametrize(
    ("namespace", "message"),
    [
        ((), "Namespace cannot be empty."),
        (("langgraph", "x"), 'Root label for namespace cannot be "langgraph"'),
        (("a.b",), "cannot contain periods"),
        (("ok", ""), "Namespace labels cannot be empty strings"),
        (("ok", 3), "Namespace labels must be strings"),
        (("a\x00b",), "cannot contain NUL bytes"),
    ],
)
def test_put_namespace_validation(lg: BaseStore, namespace: Any, message: str) -> None:
    with pytest.raises(InvalidNamespaceError, match=message):
        lg.put(namespace, "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError, match=message):
        asyncio.run(lg.aput(namespace, "k", {"v": 1}))


@pytest.mark.parametrize("namespace", [("a.b",), ("",)])
def test_read_namespace_validation(lg: BaseStore, namespace: tuple[str, ...]) -> None:
    with pytest.raises(InvalidNamespaceError):
        lg.get(namespace, "k")
    with pytest.raises(InvalidNamespaceError):
        lg.search(namespace)
    with pytest.raises(InvalidNamespaceError):
        lg.delete(namespace, "k")
    with pytest.raises(InvalidNamespaceError):
        lg.list_namespaces(prefix=namespace)


def test_search_namespace_prefix(lg: BaseStore) -> None:
    lg.put(("docs",), "root", {"n": 0})
    lg.put(("docs", "a"), "one", {"n": 1})
    lg.put(("docs", "a", "deep"), "two", {"n": 2})
    lg.put(("docsx",), "other", {"n": 3})
    lg.put(("users",), "u", {"n": 4})
    assert keys(lg.search(("docs",))) == {"root", "one", "two"}
    assert keys(lg.search(("docs", "a"))) == {"one", "two"}
    assert keys(lg.search(("docs", "a", "deep", "deeper"))) == set()
    assert keys(lg.search((), limit=100)) == {"root", "one", "two", "other", "u"}


FILTER_CASES: list[tuple[dict[str, Any], set[str]]] = [
    ({"color": "red"}, {"r1", "r3"}),
    ({"n": {"$eq": 2}}, {"b2"}),
    ({"n": {"$ne": 2}}, {"r1", "r3", "g4", "b5"}),
    ({"n": {"$gt": 3}}, {"g4", "b5"}),
    ({"n": {"$gte": 3}}, {"r3", "g4", "b5"}),
    ({"n": {"$lt": 3}}, {"r1", "b2"}),
    ({"n": {"$lte": 3}}, {"r1", "b2", "r3"}),
    ({"n": {"$gt": 1, "$lt": 5}}, {"b2", "r3", "g4"}),
    ({"n": {"$gte": 2.5}, "color": "red"}, {"r3"}),
    ({"meta": {"size": "L"}}, {"r1", "g4"}),
    ({"meta": {"size": "L", "fit": "slim"}}, {"g4"}),
    ({"tags": ["x", "y"]}, {"b2"}),
    ({"color": "purple"}, set()),
    ({"color": {"$ne": "red"}}, {"b2", "g4", "b5"}),
]


@pytest.mark.parametrize(("filter", "expected"), FILTER_CASES)
def test_search_filters(lg: BaseStore, filter: dict[str, Any], expected: set[str]) -> None:
    rows = [
        ("r1", {"color": "red", "n": 1, "meta": {"size": "L"}}),
        ("b2", {"color": "blue", "n": 2, "tags": ["x", "y"]}),
        ("r3", {"color": "red", "n": 3, "tags": ["x"]}),
        ("g4", {"color": "green", "n": 4, "meta": {"size": "L", "fit": "slim"}}),
        ("b5", {"color": "blue", "n": 5}),
    ]
    for key, value in rows:
        lg.put(("shop", "items"), key, value)
    assert keys(lg.search(("shop",), filter=filter, limit=50)) == expected


def test_unsupported_operator_is_a_value_error(lg: BaseStore) -> None:
    lg.put(("shop",), "a", {"n": 1})
    with pytest.raises(ValueError, match=r"Unsupported operator: \$in"):
        lg.search(("shop",), filter={"n": {"$in": [1]}})


def test_limit_and_offset_page_through_everything(lg: BaseStore) -> None:
    for i in range(7):
        lg.put(("log",), f"e{i}", {"i": i})
    pages = [lg.search(("log",), limit=3, offset=o) for o in (0, 3, 6)]
    assert [len(p) for p in pages] == [3, 3, 1]
    assert set().union(*(keys(p) for p in pages)) == {f"e{i}" for i in range(7)}
    assert lg.search(("log",), limit=3, offset=10) == []
    assert len(lg.search(("log",))) == 7  # default limit 10


def populate_namespaces(lg: BaseStore) -> None:
    for namespace in [
        ("a", "b", "c"),
        ("a", "b", "d", "e"),
        ("a", "b", "d", "i"),
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
        ("users", "123"),
        ("users", "456", "settings"),
        ("admin", "users", "789"),
    ]:
        lg.put(namespace, "k", {"v": 1})


LIST_CASES: list[tuple[dict[str, Any], list[tuple[str, ...]]]] = [
    (
        {"prefix": ("a", "b")},
        [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")],
    ),
    ({"suffix": ("f",)}, [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]),
    ({"prefix": ("a",), "suffix": ("f",)}, [("a", "b", "f"), ("a", "c", "f")]),
    ({"prefix": ("a", "*", "f")}, [("a", "b", "f"), ("a", "c", "f")]),
    ({"suffix": ("*", "f")}, [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]),
    ({"prefix": ("a",), "max_depth": 2}, [("a", "b"), ("a", "c")]),
    ({"max_depth": 1}, [("a",), ("admin",), ("b",), ("users",)]),
    ({"prefix": ("a", "b", "d"), "max_depth": 3}, [("a", "b", "d")]),
    ({"prefix": ("users",), "limit": 1}, [("users", "123")]),
    ({"prefix": ("users",), "offset": 1}, [("users", "456", "settings")]),
    ({"prefix": ("nope",)}, []),
    ({"suffix": ("users", "*")}, [("admin", "users", "789"), ("users", "123")]),
]


@pytest.mark.parametrize(("kwargs", "expected"), LIST_CASES)
def test_list_namespaces(
    lg: BaseStore, kwargs: dict[str, Any], expected: list[tuple[str, ...]]
) -> None:
    populate_namespaces(lg)
    assert lg.list_namespaces(**kwargs) == expected
    assert asyncio.run(lg.alist_namespaces(**kwargs)) == expected


def test_list_namespaces_default_is_sorted_and_complete(lg: BaseStore) -> None:
    populate_namespaces(lg)
    listed = lg.list_namespaces()
    assert listed == sorted(listed) and len(listed) == 9


def test_batch_reads_see_the_state_before_its_puts(lg: BaseStore) -> None:
    lg.put(("b",), "x", {"v": "old"})
    results = lg.batch(
        [
            PutOp(("b",), "x", {"v": "new"}),
            GetOp(("b",), "x"),
            PutOp(("b",), "y", {"v": "first"}),
            PutOp(("b",), "y", {"v": "last"}),
            SearchOp(("b",)),
            ListNamespacesOp(),
        ]
    )
    assert results[0] is None and results[2] is None and results[3] is None
    assert results[1] is not None and results[1].value == {"v": "old"}
    assert [i.key for i in results[4]] == ["x"]
    assert results[5] == [("b",)]
    assert lg.get(("b",), "x").value == {"v": "new"}  # type: ignore[union-attr]
    assert lg.get(("b",), "y").value == {"v": "last"}  # type: ignore[union-attr]


def test_unknown_op_is_refused(lg: BaseStore) -> None:
    with pytest.raises(ValueError, match="Unknown operation type"):
        lg.batch([("not", "an", "op")])  # type: ignore[list-item]


def test_async_api(lg: BaseStore) -> None:
    async def scenario() -> None:
        await lg.aput(("async", "ns"), "a", {"color": "red", "n": 1})
        await lg.aput(("async", "ns"), "b", {"color": "blue", "n": 2})
        item = await lg.aget(("async", "ns"), "a")
        assert item is not None and item.value == {"color": "red", "n": 1}
        found = await lg.asearch(("async",), filter={"n": {"$gte": 2}})
        assert [i.key for i in found] == ["b"]
        assert await lg.alist_namespaces(prefix=("async",)) == [("async", "ns")]
        await lg.adelete(("async", "ns"), "a")
        assert await lg.aget(("async", "ns"), "a") is None
        results = await lg.abatch([GetOp(("async", "ns"), "b"), SearchOp(("async",))])
        assert results[0].value["n"] == 2 and keys(results[1]) == {"b"}

    asyncio.run(scenario())


def test_concurrent_async_puts_all_land(lg: BaseStore) -> None:
    async def scenario() -> list[Any]:
        await asyncio.gather(*(lg.aput(("many",), f"k{i}", {"i": i}) for i in range(12)))
        return await lg.asearch(("many",), limit=50)

    found = asyncio.run(scenario())
    assert sorted(item.value["i"] for item in found) == list(range(12))
