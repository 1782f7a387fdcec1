"""Reinforcement, decay, expiry, purge and consolidation on real databases, with an
injected clock (nothing sleeps)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import event, select, text

from memory import consolidation, expiry, queries, reinforcement
from memory.expiry import TtlConfig
from memory.forgetting import delete_where
from memory.maintenance_tables import memory_links, tombstones
from memory.records import Kind, Layer, Source, Status
from memory.reinforcement import Direction, Vote
from memory.store import Store
from memory.tables import memories
from memory.vote_rights import VoteRights
from tests.clock import Clock
from tests.integration.test_maintenance_support import ANA, candidate, insert_active
from workers.cli import main_group
from workers.maintenance import one_pass_at_a_time, run_job

pytestmark = pytest.mark.integration


def stored(store: Store, *contents: str, run: str = "r1") -> list[str]:
    receipt = store.apply([candidate(c, run=run) for c in contents], handle=run, actor="w")
    return [d.memory_id or "" for d in receipt.decisions]


def row(store: Store, memory_id: str) -> Any:
    with store.engine.connect() as conn:
        return conn.execute(select(memories).where(memories.c.id == memory_id)).mappings().one()


OPERATOR = {"": VoteRights.of_operator(ANA.tenant)}  # votes that name no run: the operator's


def vote(store: Store, votes: list[Vote], handle: str = "") -> reinforcement.VoteReport:
    with store.engine.begin() as conn:
        return reinforcement.apply_votes(conn, votes, store.clock(), rights=OPERATOR, handle=handle)


def loaded_ids(store: Store) -> set[str]:
    return set(store.load(ANA, goal="disk billing").ids)


# -- reinforcement and decay ---------------------------------------------------


def test_up_raises_and_restarts_the_clock_down_lowers_and_hides(store: Store, clock: Clock) -> None:
    up_id, down_id = stored(store, "disk of db-1 is 91% full", "billing-api p99 is 2.1s")
    clock.advance(days=10)
    report = vote(
        store,
        [
            Vote(up_id, Direction.UP, "run:a"),
            Vote(down_id, Direction.DOWN, "run:a"),
            Vote(down_id, Direction.DOWN, "run:b"),
            Vote("nope", Direction.UP, "run:a"),
        ],
    )
    assert (report.up, report.down, report.applied, report.unknown) == (2, 2, 2, ("nope",))
    up, down = row(store, up_id), row(store, down_id)
    assert up["last_reinforced_at"] == clock() and up["score"] > 1.0
    assert down["score"] == 0.0 and down["last_reinforced_at"] == clock() - timedelta(days=10)
    assert loaded_ids(store) == {up_id}


def test_loading_and_searching_do_not_reinforce(store: Store, clock: Clock) -> None:
    [memory_id] = stored(store, "disk of db-1 is 91% full")
    before = row(store, memory_id)
    clock.advance(days=3)
    assert loaded_ids(store) == {memory_id}
    assert store.search(ANA, "disk")
    after = row(store, memory_id)
    assert (after["score"], after["last_reinforced_at"]) == (
        before["score"],
        before["last_reinforced_at"],
    )


def test_a_batch_of_votes_is_a_few_statements_and_a_redelivery_is_a_no_op(store: Store) -> None:
    ids = stored(store, *(f"fact number {i} about disks" for i in range(300)))
    votes = [
        Vote(i, Direction.UP if n % 3 else Direction.DOWN, f"run:{n % 2}")
        for n, i in enumerate(ids)
    ]
    statements: list[str] = []
    listener = lambda *a: statements.append(a[2])  # noqa: E731
    event.listen(store.engine, "before_cursor_execute", listener)
    try:
        first = vote(store, votes, handle="votes:run-9")
    finally:
        event.remove(store.engine, "before_cursor_execute", listener)
    updates = [s for s in statements if s.lstrip().upper().startswith("UPDATE")]
    assert first.applied == 300 and 0 < len(updates) <= 2
    again = vote(store, votes, handle="votes:run-9")
    assert again.duplicate and again.applied == 0
    assert row(store, ids[1])["score"] == pytest.approx(1.25)


def test_decay_hides_a_down_voted_memory_in_time_but_not_a_fresh_one(
    store: Store, clock: Clock
) -> None:
    weak, fresh = stored(store, "disk of db-1 is 91% full", "billing-api p99 is 2.1s")
    vote(store, [Vote(weak, Direction.DOWN, "run:a")])
    clock.advance(days=80)
    # Checked and still true: an up-vote restarts its clock, so the 90-day TTL
    # (which load applies) does not hide it at day 100.
    vote(store, [Vote(fresh, Direction.UP, "run:b")], handle="votes:run-b")
    assert reinforcement.ranking_multiplier(0.5, clock() - timedelta(days=80), clock()) < 1.0
    with store.engine.begin() as conn:
        assert reinforcement.decay(conn, clock(), dry_run=True) == 0
    clock.advance(days=20)  # 0.5 halves every 90 days: under 0.25 after 90
    with store.engine.begin() as conn:
        assert reinforcement.decay(conn, clock(), dry_run=True) == 1
        assert reinforcement.decay(conn, clock()) == 1
        assert reinforcement.decay(conn, clock()) == 0  # idempotent: already under the bar
    assert row(store, weak)["score"] < 0.25
    assert loaded_ids(store) == {fresh}


# -- expiry and purge ------------------------------------------------------------


def test_ttl_runs_from_the_last_reinforcement(store: Store, clock: Clock) -> None:
    kept, lapsed = stored(store, "disk of db-1 is 91% full", "billing-api p99 is 2.1s")
    clock.advance(days=80)
    vote(store, [Vote(kept, Direction.UP, "operator")])
    clock.advance(days=11)  # 91 days since writing, 11 since the up-vote
    with store.engine.connect() as conn:
        loadable = select(memories.c.id).where(
            queries.loadable(clock(), 0.25), ~expiry.expired_clause(clock(), TtlConfig())
        )
        assert set(conn.execute(loadable).scalars()) == {kept}  # immediately, before a pass
    with store.engine.begin() as conn:
        assert expiry.expire(conn, clock(), TtlConfig()) == 1
    assert row(store, lapsed)["status"] == Status.EXPIRED and loaded_ids(store) == {kept}


def test_ttl_per_kind_and_valid_to(store: Store, clock: Clock) -> None:
    store.apply(
        [
            candidate("call with ana went well", kind=Kind.EPISODE, run="e"),
            candidate("db-1 maintenance window", run="e").replace(
                valid_to=clock() + timedelta(days=2)
            ),
        ],
        handle="e",
        actor="w",
    )
    ttl = TtlConfig.parse("episode=7")
    clock.advance(days=3)
    with store.engine.begin() as conn:
        assert expiry.expire(conn, clock(), ttl) == 1  # the time-bound fact
    clock.advance(days=5)
    with store.engine.begin() as conn:
        assert expiry.expire(conn, clock(), ttl) == 1  # the episode, 8 days unreinforced
    assert store.show(ANA) == []


def test_purge_after_deletes_expired_rows_with_a_tombstone(store: Store, clock: Clock) -> None:
    stored(store, "disk of db-1 is 91% full")
    clock.advance(days=91)
    with store.engine.begin() as conn:
        expiry.expire(conn, clock())
    where = expiry.purgeable_clause(clock(), timedelta(days=30))
    assert delete_where(store.engine, "acme", where, now=clock(), reason="purge").deleted == 0
    clock.advance(days=31)
    report = delete_where(
        store.engine,
        "acme",
        expiry.purgeable_clause(clock(), timedelta(days=30)),
        now=clock(),
        reason="purge",
    )
    assert report.deleted == 1 and report.exhaustive
    assert store.show(ANA, all_statuses=True) == []
    with store.engine.connect() as conn:
        [stone] = conn.execute(select(tombstones)).mappings().all()
    assert (stone["role"], stone["selector"], stone["deleted"]) == ("maintenance", "purge", 1)


# -- consolidation ---------------------------------------------------------------


def test_consolidation_merges_duplicates_keeping_every_contributor(
    store: Store, clock: Clock
) -> None:
    base = "the billing api p99 latency was two point one seconds during the evening peak"
    a, b, c, d = stored(
        store,
        "Disk of db-1 is 91%  full",
        base,
        "ward 3 closes at 9",
        "ward 3 closes at 10",
        run="r1",
    )
    clock.advance(minutes=5)
    e, f = stored(store, "disk of DB-1 is 91% full", base + " again", run="r2")
    with store.engine.begin() as conn:
        # Two active rows under one key: a race made these before revision 0010's
        # unique index, which a store that has not run it yet lacks.
        conn.execute(text("DROP INDEX uq_ns_memories_active_slot"))
        older = insert_active(conn, "plan is A", key="plan", now=clock())
        clock.advance(seconds=1)
        newer = insert_active(conn, "plan is B", key="plan", now=clock())

    with store.engine.begin() as conn:
        planned = consolidation.plan(conn, "acme", clock())
    counts = planned.counts()
    assert (counts["same-content"], counts["near-duplicate"], counts["same-key"]) == (1, 1, 1)
    assert row(store, e)["status"] == Status.ACTIVE  # planning changes nothing
    with store.engine.begin() as conn:
        report = consolidation.apply(conn, planned, clock())

    assert (report.merged, report.skipped) == (3, 0)
    assert report.active_after == report.active_before - 3
    assert row(store, e)["superseded_by_id"] == a and row(store, f)["superseded_by_id"] == b
    assert row(store, older)["superseded_by_id"] == newer
    assert {row(store, i)["status"] for i in (c, d)} == {Status.ACTIVE}  # 9 vs 10: not near
    with store.engine.connect() as conn:
        links = {(r.target_id, r.source_id, r.rule) for r in conn.execute(select(memory_links))}
    assert links == {(a, e, "same-content"), (b, f, "near-duplicate"), (newer, older, "same-key")}


def test_consolidation_compacts_old_episodes_and_rebuilds_hot(store: Store, clock: Clock) -> None:
    store.apply(
        [candidate(f"handled incident INC-{i}", kind=Kind.EPISODE) for i in range(7)],
        handle="e",
        actor="w",
    )
    clock.advance(days=31)
    with store.engine.begin() as conn:
        report = consolidation.apply(conn, consolidation.plan(conn, "acme", clock()), clock())
    assert (report.compacted, report.summaries) == (7, 1)
    [summary] = store.show(ANA)
    assert summary.content.startswith("Summary of 7 episodes") and "INC-6" in summary.content
    with store.engine.begin() as conn:  # a second pass finds nothing more to do
        again = consolidation.plan(conn, "acme", clock())
    assert again.merges == () and again.compactions == ()


def test_a_write_landing_between_plan_and_apply_is_never_lost(store: Store, clock: Clock) -> None:
    [a] = stored(store, "disk of db-1 is 91% full", run="r1")
    clock.advance(minutes=1)
    [b] = stored(store, "Disk of db-1 is 91% full", run="r2")
    with store.engine.begin() as conn:
        planned = consolidation.plan(conn, "acme", clock())
    assert [(m.source_id, m.target_id) for m in planned.merges] == [(b, a)]
    # Meanwhile: the absorbed row is rewritten by a retried write, and new memories land.
    store.apply(
        [candidate("disk of db-1 is 95% full", run="r2", idem=row(store, b)["idempotency_key"])],
        handle="r1b",
        actor="w",
    )
    new_ids = stored(store, "disk of db-1 is 91% full", "brand new fact", run="r9")
    with store.engine.begin() as conn:
        report = consolidation.apply(conn, planned, clock())
    assert (report.merged, report.skipped) == (0, 1)
    assert (
        row(store, b)["content"] == "disk of db-1 is 95% full"
        and row(store, b)["status"] == Status.ACTIVE
    )
    assert all(row(store, i)["status"] == Status.ACTIVE for i in new_ids)


def test_sql_and_record_forms_of_expiry_and_votes_agree(store: Store, clock: Clock) -> None:
    scopes = [ANA, ANA.at(Layer.SHARED), ANA.at(Layer.AGENT), ANA.at(Layer.TENANT)]
    for age in (5, 20, 40, 100):
        store.apply(
            [
                candidate(
                    f"{kind.value} {scope} aged {age}",
                    scope=scope,
                    kind=kind,
                    source=Source.OPERATOR,
                )
                for scope in scopes
                for kind in (Kind.FACT, Kind.EPISODE, Kind.INSTRUCTION)
            ],
            handle=f"age-{age}",
            actor="w",
        )
        clock.advance(days=-age)
    clock.advance(days=200)
    ttl = TtlConfig.parse("default=60;episode=14;tenant=180;private/fact=30")
    every = [m for s in scopes for m in store.show(s, all_statuses=True) if m.scope == s]
    with store.engine.connect() as conn:
        by_sql = set(
            conn.execute(select(memories.c.id).where(expiry.expired_clause(clock(), ttl))).scalars()
        )
    by_record = {m.id for m in every if expiry.is_expired(m, clock(), ttl)}
    assert by_sql == by_record and 0 < len(by_sql) < len(every)

    first = every[0]
    vote(store, [Vote(first.id, Direction.UP, "a"), Vote(first.id, Direction.UP, "b")])
    expected = reinforcement.after_votes(first.score, first.last_reinforced_at, 2, clock())
    after = row(store, first.id)
    assert (
        after["score"] == pytest.approx(expected[0]) and after["last_reinforced_at"] == expected[1]
    )


def test_expired_episode_summary_is_purged_like_any_row(store: Store, clock: Clock) -> None:
    store.apply(
        [candidate(f"handled incident INC-{i}", kind=Kind.EPISODE) for i in range(6)],
        handle="e",
        actor="w",
    )
    clock.advance(days=31)
    summary = run_job(store.engine, "consolidate", now=clock())
    assert summary.counts["summaries"] == 1
    clock.advance(days=91)
    assert run_job(store.engine, "expire", now=clock()).counts == {"expired": 1}
    clock.advance(days=31)
    assert run_job(store.engine, "purge", now=clock(), dry_run=True).counts == {"purgeable": 1}
    purged = run_job(store.engine, "purge", now=clock())
    # The summary goes, and with it the superseded episodes it absorbed.
    assert (purged.counts["deleted"], purged.counts["failed"], purged.counts["remaining"]) == (
        7,
        0,
        0,
    )
    assert store.show(ANA, all_statuses=True) == []


# -- one pass of a job at a time -------------------------------------------------------


def test_a_second_pass_of_a_job_waits_for_none_and_is_told_to_skip(store: Store) -> None:
    engine = store.engine
    postgres = engine.dialect.name == "postgresql"
    with one_pass_at_a_time(engine, "expire") as first:
        assert first
        with one_pass_at_a_time(engine, "expire") as second:
            assert second is not postgres  # SQLite: one machine, its writers serialised
        with one_pass_at_a_time(engine, "decay") as other_job:
            assert other_job  # each job has its own lock
    with one_pass_at_a_time(engine, "expire") as after:
        assert after  # released when the first pass ended


@pytest.mark.parametrize(
    ("args", "env", "exit_code", "message"),
    [
        (["--purge-after", "99999999999"], {}, 2, "99999999999 is not in the range 0<=x<=36500"),
        ([], {"NIGHTSHIFT_PURGE_AFTER_DAYS": "99999999999"}, 2, "NIGHTSHIFT_PURGE_AFTER_DAYS"),
        (["--ttl", "default=90;default=30"], {}, 3, "'default' is given twice"),
        # A blank tenant (an unset variable in a script) counted every tenant's rows.
        (["--tenant", " "], {}, 2, "must not be empty"),
    ],
)
def test_maintain_refuses_out_of_range_settings_with_its_exit_code(
    store: Store, args: list[str], env: dict[str, str], exit_code: int, message: str
) -> None:
    url = store.engine.url.render_as_string(hide_password=False)
    result = CliRunner().invoke(
        main_group, ["--database-url", url, "maintain", "purge", *args], env=env
    )
    assert result.exit_code == exit_code, result.output
    assert message in result.output and "Traceback" not in result.output


def test_same_content_under_two_keys_keeps_both_slots(store: Store, clock: Clock) -> None:
    """Two keys holding one value are two facts (two LangGraph items holding {"a":1}
    are two items): consolidation merged the newer into the older, and a read of its
    key found nothing. A keyed row is never absorbed by content; an unkeyed twin may
    still merge into it."""
    [first] = stored(store, "due 2027-03-01")
    clock.advance(minutes=1)
    store.apply(
        [
            candidate("due 2027-03-01", key="renewal", run="r2"),
            candidate("due 2027-03-01", key="invoice", run="r2"),
        ],
        handle="r2",
        actor="w",
    )
    clock.advance(minutes=5)
    [loose] = stored(store, "Due 2027-03-01", run="r3")
    with store.engine.begin() as conn:
        planned = consolidation.plan(conn, "acme", clock())
    assert [(m.source_id, m.rule) for m in planned.merges] == [(loose, "same-content")]
    with store.engine.begin() as conn:
        consolidation.apply(conn, planned, clock())
    for key in ("renewal", "invoice"):
        [current] = [m for m in store.history(ANA, key) if m.status is Status.ACTIVE]
        assert current.content == "due 2027-03-01"
    assert row(store, first)["status"] == Status.ACTIVE
