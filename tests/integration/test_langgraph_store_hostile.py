"""The LangGraph adapter against hostile arguments: each is refused before anything is
read or written, with an error naming what was wrong, where LangGraph's own stores
answered wrongly (a negative slice), lost the item (a TTL already over) or raised
whatever the layer below raised (RecursionError, UnicodeEncodeError, OverflowError)."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.clock import Clock
from tests.integration.langgraph_store_fixtures import ANA, adapter, nightshift_store

from langgraph.store.base import InvalidNamespaceError, PutOp  # isort: skip
from memory.langgraph import NightshiftStore  # isort: skip
from memory.langgraph.encoding import memory_key  # isort: skip

pytestmark = pytest.mark.integration


@pytest.fixture
def lg(database_url: str, clock: Clock) -> Iterator[NightshiftStore]:
    with nightshift_store(database_url, clock) as store:
        yield adapter(store)


def put_three(lg: NightshiftStore) -> None:
    for key in ("a", "b", "c"):
        lg.put(("notes", key), key, {"n": key})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": -1}, "limit must be 0 or more, got -1"),
        ({"offset": -2}, "offset must be 0 or more, got -2"),
    ],
)
def test_a_negative_page_is_refused_not_sliced(
    lg: NightshiftStore, kwargs: dict[str, Any], message: str
) -> None:
    put_three(lg)
    with pytest.raises(ValueError, match=message):
        lg.search(("notes",), **kwargs)
    with pytest.raises(ValueError, match=message):
        lg.list_namespaces(**kwargs)


@pytest.mark.parametrize("max_depth", [0, -1])
def test_list_namespaces_max_depth_must_be_positive(lg: NightshiftStore, max_depth: int) -> None:
    put_three(lg)
    with pytest.raises(ValueError, match=f"max_depth must be 1 or more, got {max_depth}"):
        lg.list_namespaces(max_depth=max_depth)


@pytest.mark.parametrize("ttl", [-5, 0, math.nan, math.inf, -math.inf, 1e300])
def test_a_ttl_that_is_not_a_positive_number_of_minutes_is_refused(
    lg: NightshiftStore, ttl: float
) -> None:
    with pytest.raises(ValueError, match=r"LangGraph item \('notes',\)/'k': ttl must be"):
        lg.put(("notes",), "k", {"n": 1}, ttl=ttl)
    assert lg.get(("notes",), "k") is None


def test_a_ttl_of_a_century_is_kept(lg: NightshiftStore) -> None:
    lg.put(("notes",), "k", {"n": 1}, ttl=100 * 365 * 24 * 60)
    item = lg.get(("notes",), "k")
    assert item is not None and item.value == {"n": 1}


def test_a_value_nested_too_deeply_is_a_type_error_naming_the_item(lg: NightshiftStore) -> None:
    value: dict[str, Any] = {}
    inner = value
    for _ in range(5000):
        inner["a"] = {}
        inner = inner["a"]
    with pytest.raises(TypeError, match=r"LangGraph item \('notes',\)/'deep': .*nests too deeply"):
        lg.put(("notes",), "deep", value)


def test_a_lone_surrogate_in_a_value_is_a_type_error_naming_the_item(lg: NightshiftStore) -> None:
    with pytest.raises(TypeError, match=r"LangGraph item \('notes',\)/'s': .*UTF-8"):
        lg.put(("notes",), "s", {"text": "half \ud800 a character"})
    assert lg.get(("notes",), "s") is None


def test_a_lone_surrogate_in_a_key_or_label_is_refused(lg: NightshiftStore) -> None:
    with pytest.raises(ValueError, match="key '\\\\ud800' is not valid UTF-8"):
        lg.put(("notes",), "\ud800", {"n": 1})
    with pytest.raises(ValueError, match="key '\\\\ud800' is not valid UTF-8"):
        lg.get(("notes",), "\ud800")
    with pytest.raises(InvalidNamespaceError, match="must be valid UTF-8"):
        lg.put(("notes\udfff",), "k", {"n": 1})


def test_a_key_in_a_raw_op_must_be_a_string(lg: NightshiftStore) -> None:
    with pytest.raises(ValueError, match="key must be a string, got int"):
        lg.batch([PutOp(("notes",), 5, {"n": 1})])  # type: ignore[arg-type]


def test_a_filter_must_be_a_mapping(lg: NightshiftStore) -> None:
    with pytest.raises(TypeError, match="filter must be a mapping of field to condition, got list"):
        lg.search(("notes",), filter=[("n", 1)])  # type: ignore[arg-type]


def test_a_refused_put_takes_the_batch_s_other_puts_with_it(lg: NightshiftStore) -> None:
    with pytest.raises(ValueError, match="ttl must be"):
        lg.batch([PutOp(("notes",), "ok", {"n": 1}), PutOp(("notes",), "bad", {"n": 2}, ttl=-1)])
    assert lg.get(("notes",), "ok") is None


def test_puts_racing_for_one_key_all_land(database_url: str, clock: Clock) -> None:
    """Writers that kept losing one slot to each other used to exhaust their replays and
    raise the unique violation of `uq_ns_memories_active_slot` (PostgreSQL: 3-13 of
    240-320 puts from 6-8 processes); replays now take turns (`memory.slot_locks`)."""
    threads, puts = 8, 25
    errors: list[BaseException] = []
    with nightshift_store(database_url, clock) as store:
        start = threading.Barrier(threads)

        def put_many(writer: int) -> None:
            lg = adapter(store)
            start.wait()
            for n in range(puts):
                try:
                    lg.put(("race",), "same", {"writer": writer, "n": n})
                except BaseException as error:  # noqa: BLE001 - every failure is the finding
                    errors.append(error)

        workers = [threading.Thread(target=put_many, args=(w,)) for w in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert errors == []
        item = adapter(store).get(("race",), "same")
        assert item is not None and item.value in [
            {"writer": w, "n": n} for w in range(threads) for n in range(puts)
        ]
        history = store.history(ANA, memory_key(("race",), "same"))
        assert len(history) == threads * puts
