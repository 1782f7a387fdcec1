"""A forget reaches the run records that quote the forgotten memory, whatever JSON
did to its text: payloads written by earlier releases escaped every non-ASCII
character (`"\\u017bubr\\u00f3wka"`), and neither the scrub nor its re-count
looked for that spelling."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import insert, select

from memory.forget_places import REDACTED, count_holding
from memory.records import Source
from memory.store import Store
from tests.clock import Clock
from tests.integration.test_maintenance_support import candidate, nightshift
from workers import runs
from workers.maintenance import RUN_TEXT
from workers.runs import RunRequest

pytestmark = pytest.mark.integration

PIN = "Ana's pager PIN hint is Żubrówka"
LOCKER = "Ana's locker code is 4471"
QUOTED = {"note": PIN, "n2": LOCKER, "from": "feed-watcher"}


def trigger(store: Store, clock: Clock, key: str, payload: dict[str, Any]) -> None:
    """The run row `nightshift trigger feed-watcher --user ana --payload p.json` makes."""
    request = RunRequest(key, "feed-watcher", "acme", "ana", trigger_kind="event", payload=payload)
    with store.engine.begin() as conn:
        assert runs.create(conn, [request], clock()) == [key]


def payloads(store: Store) -> dict[str, str]:
    with store.engine.connect() as conn:
        rows = conn.execute(select(runs.runs.c.key, runs.runs.c.payload)).all()
    return {key: payload for key, payload in rows}


def test_forget_scrubs_escaped_and_plain_quotes_from_run_records(
    store: Store, clock: Clock
) -> None:
    store.apply(
        [candidate(PIN, source=Source.STATED), candidate(LOCKER, source=Source.STATED)],
        handle="h",
        actor="writer",
    )
    with store.engine.begin() as conn:  # a run an earlier release recorded: escaped JSON
        conn.execute(
            insert(runs.runs).values(
                key="feed-watcher/acme/ana@event:old",
                agent="feed-watcher",
                tenant="acme",
                user_id="ana",
                trigger_kind="event",
                time_limit=60,
                status="succeeded",
                enqueued_at=clock(),
                payload=json.dumps(QUOTED),
                summary=f"Read: {PIN}.",
            )
        )
    clock.advance(minutes=1)
    trigger(store, clock, "feed-watcher/acme/ana@event:new", QUOTED)
    stored = payloads(store)
    assert "\\u017bubr\\u00f3wka" in stored["feed-watcher/acme/ana@event:old"]
    assert PIN in stored["feed-watcher/acme/ana@event:new"]  # written as it reads now

    done = nightshift(
        store.engine, "memory", "forget", "--tenant", "acme", "--subject", "ana",
        "--as", "person:ana", "--json",
    )  # fmt: skip

    assert done.exit_code == 0, done.output
    report = json.loads(done.output)
    assert (report["deleted"], report["remaining"], report["exhaustive"]) == (2, 0, True)
    assert report["rebuilt"]["runs"] == 2 and report["places"]["runs"] == 0
    for text in payloads(store).values():
        assert json.loads(text) == {"note": REDACTED, "n2": REDACTED, "from": "feed-watcher"}
    with store.engine.connect() as conn:
        assert set(conn.execute(select(runs.runs.c.summary)).scalars()) == {
            f"Read: {REDACTED}.",
            "",
        }


def test_the_recount_sees_a_quote_in_its_escaped_spelling(store: Store, clock: Clock) -> None:
    quote = "ana's pager pin hint is Żubrówka"  # its case folds where JSON left it letters
    trigger(store, clock, "feed-watcher/acme/ana@event:1", {"note": quote})
    with store.engine.begin() as conn:
        conn.execute(runs.runs.update().values(payload=json.dumps({"note": quote})))  # escaped
    with store.engine.connect() as conn:
        assert count_holding(conn, RUN_TEXT, "acme", PIN) == 1
        assert count_holding(conn, RUN_TEXT, "other", PIN) == 0


def test_a_payload_with_no_utf8_form_is_still_recorded(store: Store, clock: Clock) -> None:
    trigger(store, clock, "feed-watcher/acme/ana@event:2", {"note": "half a pair \ud83d"})
    assert json.loads(payloads(store)["feed-watcher/acme/ana@event:2"]) == {
        "note": "half a pair \ud83d"
    }
