"""Maintenance as an operator meets it: the CLI against a real store, and beat sending
the periodic passes to a real maintenance worker."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from memory.maintenance_tables import vote_batches
from memory.records import Candidate, Kind, Provenance, Scope, Source, Status
from memory.reinforcement import Direction, Vote
from memory.store import Store
from memory.tables import audit, memories
from tests.acceptance.harness import System
from workers import runs
from workers.app import create_app
from workers.maintenance import VOTES_TASK
from workers.runs import RunRequest
from workers.settings import Settings
from workers.sharding import write_queue

pytestmark = pytest.mark.acceptance

ANA = Scope("acme", "ana", "triage")


def seed(system: System, *, days_ago: float) -> list[str]:
    at = datetime.now(UTC) - timedelta(days=days_ago)
    store = Store(system.engine, clock=lambda: at)

    def fact(content: str, run: str, kind: Kind = Kind.FACT) -> Candidate:
        return Candidate(
            scope=ANA,
            kind=kind,
            content=content,
            provenance=Provenance(Source.OBSERVED, run_id=run, task_id=run, subject="ana"),
        )

    ids: list[str] = []
    for run, content in [
        ("r1", "db-1 disk is 91% full"),
        ("r2", "DB-1 disk is 91%  full"),
        ("r3", "ana owns the billing pager"),
    ]:
        receipt = store.apply([fact(content, run)], handle=run, actor="writer")
        ids += [d.memory_id or "" for d in receipt.decisions]
    return ids


def statuses(system: System) -> dict[str, str]:
    with system.engine.connect() as conn:
        return {r.id: r.status for r in conn.execute(select(memories.c.id, memories.c.status))}


def ok(system: System, *args: str) -> dict:
    result = system.cli(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_maintain_vote_and_forget_from_the_command_line(system: System) -> None:
    first, duplicate, pager = seed(system, days_ago=1)

    plan = ok(system, "maintain", "consolidate", "--tenant", "acme", "--dry-run")
    assert plan["dry_run"] and plan["counts"]["same-content"] == 1
    assert set(statuses(system).values()) == {Status.ACTIVE}
    done = ok(system, "maintain", "consolidate")
    now = statuses(system)
    assert done["counts"]["merged"] == 1
    assert sorted([now[first], now[duplicate]]) == [Status.ACTIVE, Status.SUPERSEDED]

    elsewhere = system.cli("memory", "vote", pager, "down", "--tenant", "other")
    assert elsewhere.returncode == 3 and "no memory" in elsewhere.stderr + elsewhere.stdout
    for voter in ("operator:a", "operator:b"):
        voted = ok(system, "memory", "vote", pager, "down", "--tenant", "acme", "--voter", voter)
    assert voted["score"] == 0.0
    assert pager not in Store(system.engine).load(ANA, goal="billing pager").ids

    refused = system.cli(
        "memory", "forget", "--tenant", "acme", "--subject", "ana", "--as", "agent:peer"
    )
    assert refused.returncode == 1 and "only the person" in refused.stderr
    with system.engine.connect() as conn:
        actors = conn.execute(
            select(audit.c.actor).where(audit.c.action == "forget.refused")
        ).scalars()
        assert list(actors) == ["agent:peer"]
    assert len(statuses(system)) == 3

    report = ok(
        system,
        "memory",
        "forget",
        "--tenant",
        "acme",
        "--subject",
        "ana",
        "--as",
        "person:ana",
        "--reason",
        "asked",
    )
    assert (report["scanned"], report["deleted"], report["remaining"], report["exhaustive"]) == (
        3,
        3,
        0,
        True,
    )
    assert statuses(system) == {}
    text = system.cli("maintain", "expire")
    assert text.returncode == 0 and text.stdout.startswith("expire · ")


def test_beat_sends_expire_and_purge_to_the_maintenance_worker(system: System) -> None:
    old = seed(system, days_ago=200)  # unreinforced past the longest TTL, expired for 110 days
    system.env.update(
        NIGHTSHIFT_EXPIRE_INTERVAL="1",
        NIGHTSHIFT_PURGE_INTERVAL="2",
        NIGHTSHIFT_CONSOLIDATE_INTERVAL="3600",
        NIGHTSHIFT_DECAY_INTERVAL="3600",
        NIGHTSHIFT_PURGE_AFTER_DAYS="0",
    )
    system.start("worker")
    system.start("beat")
    system.wait_for(
        "expire then purge on beat",
        lambda: not any(i in statuses(system) for i in old),
        timeout=120,
    )
    with system.engine.connect() as conn:
        purges = conn.execute(select(audit.c.actor).where(audit.c.action == "forget")).scalars()
        assert set(purges) == {"maintenance:purge"}


def test_vote_batches_travel_through_the_writer_queue_once(system: System) -> None:
    first, _, pager = seed(system, days_ago=1)
    with system.engine.begin() as conn:  # run r9 was given the pager memory, not the first
        runs.create(conn, [RunRequest(key="r9", agent="triage", tenant="acme")], datetime.now(UTC))
        runs.claim(conn, "r9", "w", datetime.now(UTC), timedelta(minutes=1))
        runs.record_given(conn, "r9", "w", [pager])
    settings = Settings.from_env(system.env)
    app = create_app(settings)
    queue = write_queue("acme", settings.writer_shards)  # the tenant's writer shard
    batch = [
        Vote(pager, Direction.DOWN, "run:triage", "r9").to_json(),
        Vote(first, Direction.DOWN, "run:triage", "r9").to_json(),  # not given to r9
        Vote(first, Direction.DOWN, "run:other", "").to_json(),  # names no run
    ]
    system.start("writer")
    try:
        # The same batch delivered twice (a broker redelivery) applies once.
        results = [
            app.send_task(VOTES_TASK, args=["votes:r9", batch], queue=queue).get(timeout=90)
            for _ in range(2)
        ]
    finally:
        app.close()
    assert [(r["applied"], r["duplicate"]) for r in results] == [(1, False), (0, True)]
    refused = results[0]["refused"]
    assert [(r["memory_id"], r["run_id"]) for r in refused] == [(first, "r9"), (first, "")]
    assert "was not given to this run" in refused[0]["reason"]
    assert "names no run" in refused[1]["reason"]
    with system.engine.connect() as conn:
        scores = dict(conn.execute(select(memories.c.id, memories.c.score)).all())
        handles = conn.execute(select(vote_batches.c.handle)).scalars().all()
        audited = conn.execute(
            select(audit.c.memory_id).where(audit.c.action == "vote.refused")
        ).scalars()
        assert list(audited) == [first, first]
    assert (scores[pager], scores[first]) == (0.5, 1.0) and handles == ["votes:r9"]
