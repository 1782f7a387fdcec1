"""PostgreSQL: a catalog change committed after a concurrent one is never missed by
the beat, which reloads by revision (`catalog.changed_since`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import pytest
from sqlalchemy import Engine, text

from memory.engine import open_engine
from schedules import catalog
from schedules.definition import Cron, Event, Schedule
from tests.services import postgres_database
from workers import schema

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 2, 12, tzinfo=UTC)
A = Schedule(name="a", agent="demo", tenant="acme", trigger=Event())
B = Schedule(name="b", agent="demo", tenant="acme", trigger=Cron("0 7 * * *"))


@pytest.fixture
def engine() -> Iterator[Engine]:
    with postgres_database() as url:
        engine = open_engine(url, pool_size=4)
        schema.upgrade(engine)
        yield engine
        engine.dispose()


def waiting_on_a_lock(engine: Engine) -> bool:
    with engine.connect() as conn:
        return bool(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock'"
                )
            ).scalar_one()
        )


def until(condition: Callable[[], bool]) -> None:
    """Poll for a state another connection reaches (not for time to pass)."""
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "the other transaction never got there"
        time.sleep(0.01)


def test_a_change_committed_after_a_concurrent_one_is_not_missed(engine: Engine) -> None:
    with engine.begin() as conn:
        catalog.apply(conn, [A, B], T0)
        seen = catalog.max_revision(conn)
    applied, commit = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def edit_b() -> None:  # an apply that starts while a pause is uncommitted
        try:
            with engine.begin() as conn:
                catalog.apply(conn, [A, B.replace(goal="edited")], T0)
                applied.set()
                assert commit.wait(10)
        except BaseException as error:  # reported below; a thread cannot fail the test
            failures.append(error)
            applied.set()

    pausing = engine.connect()
    pause = pausing.begin()
    catalog.set_paused(pausing, "a", True, "", T0)
    editor = threading.Thread(target=edit_b)
    editor.start()
    until(lambda: applied.is_set() or waiting_on_a_lock(engine))
    pause.commit()
    pausing.close()

    with engine.connect() as conn:  # a beat reloads between the two commits
        first = catalog.changed_since(conn, seen)
    seen = max([seen, *(a.revision for a in first)])
    commit.set()
    editor.join()
    assert not failures, failures
    with engine.connect() as conn:  # and again after the edit committed
        second = catalog.changed_since(conn, seen)

    assert [a.name for a in first] == ["a"]
    assert [(a.name, a.schedule.goal) for a in second] == [("b", "edited")]
