"""Fixtures for the LangGraph adapter tests: a clock, and stores on every backend."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base", reason="SKIPPED LOUDLY: pip install '.[langgraph]'")

from langgraph.store.base import BaseStore, TTLConfig  # noqa: E402
from langgraph.store.memory import InMemoryStore  # noqa: E402

from memory.engine import open_engine  # noqa: E402
from memory.langgraph import NightshiftStore  # noqa: E402
from memory.records import Provenance, Scope, Source  # noqa: E402
from memory.store import Store  # noqa: E402
from tests.clock import Clock
from tests.services import postgres_database  # noqa: E402
from workers import schema  # noqa: E402

ANA = Scope("acme", "ana", "triage")
BOB = Scope("acme", "bob", "triage")


@contextmanager
def nightshift_store(url: str, clock: Clock) -> Iterator[Store]:
    engine = open_engine(url)
    schema.upgrade(engine)
    try:
        yield Store(engine, clock=clock)
    finally:
        engine.dispose()


def adapter(
    store: Store,
    scope: Scope = ANA,
    *,
    source: Source = Source.OPERATOR,
    ttl: TTLConfig | None = None,
    scan_limit: int = 10_000,
) -> NightshiftStore:
    return NightshiftStore(
        store,
        scope,
        actor=f"langgraph:{scope}",
        provenance=Provenance(source, agent=scope.agent, run_id="thread-1"),
        ttl=ttl,
        scan_limit=scan_limit,
    )


@contextmanager
def any_store(kind: str, tmp_path: Path, clock: Clock) -> Iterator[BaseStore]:
    """A LangGraph store of `kind`: nightshift on SQLite or PostgreSQL, or LangGraph's own."""
    if kind == "langgraph-inmemory":
        yield InMemoryStore()
        return
    if kind == "nightshift-sqlite":
        with nightshift_store(f"sqlite:///{tmp_path / 'store.db'}", clock) as store:
            yield adapter(store)
        return
    with postgres_database() as url, nightshift_store(url, clock) as store:
        yield adapter(store)
