"""Forgetting on real databases: the forgotten text is nowhere afterwards, and the
report proves it (or says why it cannot)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, insert, select

from memory import consolidation, hot
from memory.forget_places import REDACTED
from memory.forgetting import (
    ForgetRefused,
    Requester,
    Selector,
    forget,
)
from memory.maintenance_tables import tombstones
from memory.port import EditRefused
from memory.records import Kind, Source, Status
from memory.store import Store
from memory.tables import audit
from tests.clock import Clock
from tests.integration.test_maintenance_support import (
    ANA,
    BOB,
    MARK,
    candidate,
    find_everywhere,
    find_in_files,
    seed_everything,
)
from workers.agents import Trigger
from workers.maintenance import FORGET_PLACES
from workers.projection import project
from workers.tables import runs

pytestmark = pytest.mark.integration


def record_run_quoting(store: Store, clock: Clock, summary: str, payload: str) -> None:
    """A finished run of Ana's whose record quotes what it was given."""
    with store.engine.begin() as conn:
        conn.execute(
            insert(runs).values(
                key="nightly@ana",
                agent="assistant",
                tenant="acme",
                user_id="ana",
                trigger_kind="cron",
                time_limit=60,
                status="succeeded",
                enqueued_at=clock(),
                summary=summary,
                payload=payload,
            )
        )


def test_forgotten_text_is_nowhere_afterwards(store: Store, clock: Clock, tmp_path: Path) -> None:
    seed_everything(store, clock)
    record_run_quoting(
        store,
        clock,
        summary=f"Checked: Phoned about {MARK.upper()} dose 1. Nothing else.",
        payload=json.dumps({"note": f"phoned about {MARK} dose 2"}),
    )
    before = set(find_everywhere(store.engine, MARK))
    # The test can fail: the text really was in memories, the index, hot, a summary, a run.
    assert {"ns_memories", "ns_hot_summaries", "ns_runs"} <= {h.split(".")[0] for h in before}
    statuses = {m.status for m in store.show(ANA, all_statuses=True)}
    assert {Status.ACTIVE, Status.SUPERSEDED, Status.PENDING_REVIEW} <= statuses

    report = forget(
        store.engine,
        Selector.by_subject("acme", "ana"),
        Requester.person("ana"),
        now=clock(),
        reason="asked by ana",
        places=FORGET_PLACES,
    )

    assert report.exhaustive and report.remaining == 0, report
    assert report.scanned == report.skipped + report.deleted + report.failed
    assert report.deleted >= 12 and report.failed == 0
    assert report.rebuilt["runs"] == 1 and report.places["runs"] == 0
    assert sum(report.places.values()) == 0
    assert find_everywhere(store.engine, MARK) == []
    with store.engine.connect() as conn:
        run = conn.execute(select(runs.c.summary, runs.c.payload)).one()
    assert run.summary == f"Checked: {REDACTED}. Nothing else."
    assert json.loads(run.payload) == {"note": REDACTED}
    if store.engine.dialect.name == "sqlite":
        db = Path(store.engine.url.database or "")
        files = [p for p in (db, db.with_name(db.name + "-wal")) if p.exists()]
        assert [p for p in files if MARK.encode() in p.read_bytes().lower()] == []
    # A later run's sandbox: a fresh load, projected as files.
    box = tmp_path / "box"
    box.mkdir()
    loaded = store.load(ANA, goal=f"check {MARK}", trigger=MARK)
    project(box, loaded, goal="check allergies", trigger=Trigger("manual", "api", None, {}))
    assert find_in_files(box, MARK) == []
    # Bob's memory is untouched and his hot summary still there.
    assert [m.content for m in store.show(BOB)] != []
    with store.engine.connect() as conn:
        assert [h.scope for h in hot.read(conn, BOB)] == [BOB]
        [stone] = conn.execute(select(tombstones)).mappings().all()
    assert stone["actor"] == "person:ana" and stone["deleted"] == report.deleted
    assert stone["selector"] == "subject" and MARK not in json.dumps(dict(stone), default=str)


def test_text_match_forget_rebuilds_summary_and_hot_without_it(store: Store, clock: Clock) -> None:
    for i in range(6):
        content = f"phoned about {MARK} dose" if i == 2 else f"routine call number {i}"
        store.apply(
            [candidate(content, kind=Kind.EPISODE, run=f"ep-{i}")], handle=f"e{i}", actor="w"
        )
    store.apply(
        [
            candidate(f"Ana likes {MARK} jokes", kind=Kind.PREFERENCE, source=Source.STATED),
            candidate("Ana likes tea", kind=Kind.PREFERENCE, source=Source.STATED),
        ],
        handle="p",
        actor="w",
    )
    clock.advance(days=40)
    with store.engine.begin() as conn:
        consolidation.apply(conn, consolidation.plan(conn, "acme", clock()), clock())

    report = forget(
        store.engine, Selector.by_text("acme", MARK.upper()), Requester.operator(), now=clock()
    )

    assert report.deleted == 2 and report.exhaustive and report.rebuilt["summaries"] == 1
    assert find_everywhere(store.engine, MARK) == []
    [summary] = [m for m in store.show(ANA) if m.kind is Kind.EPISODE]
    assert summary.content.startswith("Summary of 5 episodes")
    with store.engine.connect() as conn:
        [summary_hot] = hot.read(conn, ANA)
    assert "Ana likes tea" in summary_hot.content


def test_text_match_forget_folds_case_beyond_ascii(store: Store, clock: Clock) -> None:
    store.apply(
        [
            candidate("Ana's boss is JÜRGEN MÜLLER", source=Source.STATED),
            candidate("Ana's office is in Zürich", run="r2"),
        ],
        handle="h",
        actor="w",
    )
    report = forget(
        store.engine, Selector.by_text("acme", "jürgen müller"), Requester.operator(), now=clock()
    )
    assert (report.deleted, report.remaining, report.exhaustive) == (1, 0, True)
    assert [m.content for m in store.show(ANA)] == ["Ana's office is in Zürich"]


def test_a_reason_holding_a_secret_is_refused_before_anything_is_forgotten(
    store: Store, clock: Clock
) -> None:
    store.apply([candidate("Ana's boss is Jürgen", source=Source.STATED)], handle="h", actor="w")
    with pytest.raises(EditRefused, match=r"secret \(password_assignment\) in reason"):
        forget(
            store.engine,
            Selector.by_subject("acme", "ana"),
            Requester.operator(),
            now=clock(),
            reason="as asked; her old password: hunter22",
        )
    assert [m.content for m in store.show(ANA)] == ["Ana's boss is Jürgen"]
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(tombstones)).scalar() == 0


def test_truncated_listing_reports_partial(store: Store, clock: Clock) -> None:
    store.apply(
        [candidate(f"fact {i} about ana", run=f"r{i}") for i in range(5)], handle="h", actor="w"
    )

    first = forget(
        store.engine, Selector.by_subject("acme", "ana"), Requester.operator(), now=clock(), limit=2
    )

    assert first.exhaustive is False and "batch limit of 2" in first.reason
    assert (first.scanned, first.deleted, first.remaining) == (2, 2, 3)
    assert first.scanned == first.skipped + first.deleted + first.failed
    second = forget(
        store.engine, Selector.by_subject("acme", "ana"), Requester.operator(), now=clock()
    )
    assert second.exhaustive and (second.deleted, second.remaining) == (3, 0)


def test_an_agent_is_refused_and_audited_the_person_and_operator_are_not(
    store: Store, clock: Clock
) -> None:
    store.apply(
        [
            candidate("Ana's badge is 4471", run="r1"),
            candidate("Bob's badge is 9911", scope=BOB, run="r1"),
        ],
        handle="h",
        actor="w",
    )
    for agent in (Requester.agent("triage"), Requester.agent("peer-bot")):
        with pytest.raises(ForgetRefused, match="only the person"):
            forget(store.engine, Selector.by_run("acme", "r1"), agent, now=clock())
    with store.engine.connect() as conn:
        refusals = (
            conn.execute(select(audit).where(audit.c.action == "forget.refused")).mappings().all()
        )
    assert sorted(r["actor"] for r in refusals) == ["agent:peer-bot", "agent:triage"]
    assert len(store.show(ANA)) == 1 and len(store.show(BOB)) == 1

    # The person may forget by run, but only what is about her: Bob's memory is not
    # reached, nor counted (`test_forget_requesters`).
    by_ana = forget(
        store.engine, Selector.by_run("acme", "r1"), Requester.person("ana"), now=clock()
    )
    assert (by_ana.scanned, by_ana.deleted, by_ana.skipped, by_ana.remaining) == (1, 1, 0, 0)
    assert store.show(ANA) == [] and len(store.show(BOB)) == 1
    by_operator = forget(
        store.engine, Selector.by_source("acme", "observed"), Requester.operator(), now=clock()
    )
    assert by_operator.deleted == 1 and store.show(BOB) == []


def test_forgetting_one_contributor_keeps_the_merged_memory(store: Store, clock: Clock) -> None:
    store.apply([candidate("ward 3 closes at 9", run="r1")], handle="h1", actor="w")
    store.apply([candidate("Ward 3 closes at  9", run="r2", subject="bob")], handle="h2", actor="w")
    with store.engine.begin() as conn:
        report = consolidation.apply(conn, consolidation.plan(conn, "acme", clock()), clock())
    assert report.merged == 1
    [survivor] = store.show(ANA)

    forget(
        store.engine, Selector.by_run("acme", survivor.run_id), Requester.operator(), now=clock()
    )

    [heir] = store.show(ANA)
    assert heir.id != survivor.id and heir.status is Status.ACTIVE
    forget(store.engine, Selector.by_ids("acme", [heir.id]), Requester.operator(), now=clock())
    assert store.show(ANA, all_statuses=True) == []
