"""A compiled LangGraph graph using nightshift memory through the store it is given.

The graph's nodes know nothing of nightshift: they take LangGraph's injected
`store` and call put/search on it, sync (`invoke`, the store's `batch`) and
async (`ainvoke`, where LangGraph batches store calls through `abatch`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import TypedDict

import pytest

from memory.records import Source, Status
from memory.store import Store
from tests.clock import Clock
from tests.integration.langgraph_store_fixtures import ANA, adapter, nightshift_store

from langgraph.graph import END, START, StateGraph  # isort: skip
from langgraph.graph.state import CompiledStateGraph  # isort: skip
from langgraph.store.base import BaseStore  # isort: skip
from memory.langgraph.encoding import memory_key  # isort: skip

pytestmark = pytest.mark.integration


class State(TypedDict, total=False):
    text: str
    found: list[str]


def remember(state: State, *, store: BaseStore) -> State:
    store.put(("memories", "ana"), "renewal", {"text": state["text"]})
    return {}


def recall(state: State, *, store: BaseStore) -> State:
    return {"found": [item.value["text"] for item in store.search(("memories",), query="renewal")]}


def graph(store: BaseStore) -> CompiledStateGraph:
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", END)
    return builder.compile(store=store)


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    with nightshift_store(database_url, Clock()) as store:
        yield store


def test_a_graph_remembers_through_nightshift(store: Store) -> None:
    app = graph(adapter(store, source=Source.STATED))
    first = app.invoke({"text": "contract renewal in March"})
    assert first["found"] == ["contract renewal in March"]
    second = asyncio.run(app.ainvoke({"text": "contract renewal moved to April"}))
    assert second["found"] == ["contract renewal moved to April"]
    history = store.history(ANA, memory_key(("memories", "ana"), "renewal"))
    assert [(m.status, m.source) for m in history] == [
        (Status.SUPERSEDED, Source.STATED),
        (Status.ACTIVE, Source.STATED),
    ]
