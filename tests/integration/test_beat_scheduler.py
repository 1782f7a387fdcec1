"""The heap beat on a real database, driven tick by tick with an injected clock."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from schedules import catalog, fires, lease
from schedules.definition import Catchup, Cron, Heartbeat, Overlap, Schedule
from schedules.fires import FireOutcome, SkipReason, run_key
from tests.integration.beat_fixtures import T0, Beats, make_beats
from workers.beat import CeleryRuns

pytestmark = pytest.mark.integration


@pytest.fixture
def beats(database_url: str, tmp_path: Path) -> Iterator[Beats]:
    yield from make_beats(database_url, tmp_path)


def every(name: str, seconds: float = 1, **settings: object) -> Schedule:
    options = {"overlap": Overlap.ALLOW_ALL, **settings}
    return Schedule(
        name=name,
        agent="demo",
        tenant="acme",
        trigger=Heartbeat(timedelta(seconds=seconds)),
        **options,  # type: ignore[arg-type]
    )


def keys_at(name: str, *seconds: float) -> list[str]:
    return [run_key(name, T0 + timedelta(seconds=s)) for s in seconds]


def tick_through(beats: Beats, beat: object, seconds: float, step: float = 0.25) -> None:
    for _ in range(round(seconds / step)):
        beats.clock.advance(step)
        beat.tick()  # type: ignore[attr-defined]


def not_run(beats: Beats, name: str) -> list[fires.FireRecord]:
    with beats.engine.connect() as conn:
        return fires.recent(conn, name, limit=50, skipped_only=True)


def test_each_fire_becomes_one_run_and_progress_is_stored(beats: Beats) -> None:
    beats.apply(every("pulse"))
    beat = beats.beat()
    beat.tick()
    tick_through(beats, beat, 3)
    assert beats.run_keys("pulse") == keys_at("pulse", 1, 2, 3)
    with beats.engine.connect() as conn:
        applied = catalog.get(conn, "pulse")
    assert applied.last_fire_at == T0 + timedelta(seconds=3)
    assert applied.runs_fired == 3


def test_only_the_lease_holder_fires_and_a_standby_takes_over_after_expiry(beats: Beats) -> None:
    beats.apply(every("pulse", catchup=Catchup.ALL))
    leader, standby = beats.beat(), beats.beat()
    leader.tick()
    standby.tick()
    assert leader.leading and not standby.leading
    for _ in range(8):
        beats.clock.advance(0.5)
        leader.tick()
        standby.tick()
    assert beats.run_keys("pulse") == keys_at("pulse", 1, 2, 3, 4)

    # The leader dies silently. The standby waits out the lease, then catches up
    # every fire missed meanwhile (catchup = all) and never repeats one.
    died_at = beats.clock()
    while not standby.leading:
        beats.clock.advance(0.5)
        standby.tick()
    assert beats.clock() - died_at <= leader.lease_ttl + standby.standby_poll
    tick_through(beats, standby, 2, step=0.5)
    last = int((beats.clock() - T0).total_seconds())
    assert beats.run_keys("pulse") == keys_at("pulse", *range(1, last + 1))


def standing_by(beats: Beats) -> list[str]:
    with beats.engine.connect() as conn:
        return [s.holder for s in lease.standbys(conn, beats.clock())]


def test_standbys_are_listed_until_they_lead_stop_or_die(beats: Beats) -> None:
    beats.apply(every("pulse"))
    leader, first, second = beats.beat(), beats.beat(), beats.beat()
    leader.tick()
    assert standing_by(beats) == []  # the leader is not its own standby
    first.tick()
    beats.clock.advance(0.5)
    second.tick()
    assert standing_by(beats) == [first.holder, second.holder]  # longest standing first

    second.close()  # a standby that stops says so
    assert standing_by(beats) == [first.holder]

    # The leader dies; the standby, still polling, stays listed until it leads.
    for _ in range(40):
        beats.clock.advance(0.5)
        first.tick()
        if first.leading:
            break
        assert standing_by(beats) == [first.holder]
    assert first.leading and standing_by(beats) == []

    # A standby that dies without a word drops out within the lease's ttl.
    third = beats.beat()
    third.tick()
    assert standing_by(beats) == [third.holder]
    for _ in range(int(third.lease_ttl.total_seconds()) + 1):
        beats.clock.advance(1)
        first.tick()
    assert standing_by(beats) == []


def test_a_new_leader_does_not_resend_what_the_old_one_sent(beats: Beats) -> None:
    beats.apply(every("pulse", catchup=Catchup.ALL))
    old = beats.beat()
    old.tick()
    tick_through(beats, old, 3)
    # The old leader sent 1..3 but died before storing its progress.
    with beats.engine.begin() as conn:
        conn.execute(catalog.schedules.update().values(last_fire_at=T0, runs_fired=0))
    beats.clock.advance(old.lease_ttl.total_seconds())
    new = beats.beat()
    new.tick()
    assert new.leading
    assert beats.run_keys("pulse") == keys_at("pulse", *range(1, 14))
    with beats.engine.connect() as conn:
        duplicates = [
            r for r in fires.recent(conn, "pulse", limit=50) if r.outcome is FireOutcome.DUPLICATE
        ]
    assert sorted(r.run_key for r in duplicates) == keys_at("pulse", 1, 2, 3)


def test_renewal_fails_after_another_beat_took_an_expired_lease(beats: Beats) -> None:
    beats.apply(every("pulse"))
    first, second = beats.beat(), beats.beat()
    first.tick()
    beats.clock.advance(first.lease_ttl.total_seconds() + 1)  # first stalls past its lease
    second.tick()
    assert second.leading
    first.tick()
    assert not first.leading


def test_clean_shutdown_hands_over_at_once(beats: Beats) -> None:
    beats.apply(every("pulse"))
    first, second = beats.beat(), beats.beat()
    first.tick()
    first.close()
    beats.clock.advance(1)
    second.tick()
    assert second.leading


def test_sigterm_during_a_send_lets_the_tick_finish_then_stops(
    beats: Beats, monkeypatch: pytest.MonkeyPatch
) -> None:
    beats.apply(*(every(f"pulse-{n}") for n in range(3)))
    beat = beats.beat()
    beat.tick()
    sent = CeleryRuns.enqueue

    def enqueue_then_terminated(self: CeleryRuns, *args: object) -> list[str]:
        created = sent(self, *args)  # type: ignore[arg-type]
        os.kill(os.getpid(), signal.SIGTERM)  # mid-tick, as a supervisor would
        return created

    def exit_like_celery_beat(signum: int, frame: object) -> None:
        raise SystemExit()

    monkeypatch.setattr(CeleryRuns, "enqueue", enqueue_then_terminated)
    previous = signal.signal(signal.SIGTERM, exit_like_celery_beat)
    try:
        beats.clock.advance(1)
        with pytest.raises(SystemExit):
            beat.tick()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert signal.getsignal(signal.SIGTERM) is previous
    # The whole batch was sent and its progress stored before the beat stopped.
    assert beats.run_keys() == sorted(keys_at(f"pulse-{n}", 1)[0] for n in range(3))
    with beats.engine.connect() as conn:
        assert {catalog.get(conn, f"pulse-{n}").runs_fired for n in range(3)} == {1}


@pytest.mark.parametrize(
    ("catchup", "expected"),
    [(Catchup.NONE, []), (Catchup.LATEST, [120]), (Catchup.ALL, [70, 80, 90, 100, 110, 120])],
)
def test_catch_up_after_downtime(beats: Beats, catchup: Catchup, expected: list[int]) -> None:
    # Every 10 s; beat down from 0 until 126; window 60 s: fires 10..60 are outside it.
    beats.apply(every("pulse", 10, catchup=catchup, catchup_window=timedelta(seconds=60)))
    with beats.engine.begin() as conn:
        conn.execute(catalog.schedules.update().values(last_fire_at=T0))
    beats.clock.advance(126)
    beat = beats.beat()
    beat.tick()
    assert beats.run_keys("pulse") == keys_at("pulse", *expected)
    records = not_run(beats, "pulse")
    window = [r for r in records if r.reason is SkipReason.CATCHUP_WINDOW]
    assert [(r.count, r.fire_time, r.last_fire_time) for r in window] == [
        (6, T0 + timedelta(seconds=10), T0 + timedelta(seconds=60))
    ]
    policy_skipped = sum(r.count for r in records if r.reason is SkipReason.CATCHUP_POLICY)
    assert policy_skipped == 6 - len(expected)


def test_fires_late_by_less_than_the_grace_are_on_time(beats: Beats) -> None:
    beats.apply(every("pulse", catchup=Catchup.NONE))
    with beats.engine.begin() as conn:
        conn.execute(catalog.schedules.update().values(last_fire_at=T0))
    beats.clock.advance(3.5)
    beat = beats.beat()
    beat.tick()
    assert beats.run_keys("pulse") == keys_at("pulse", 1, 2, 3)


def test_overlap_skip_records_the_fire(beats: Beats) -> None:
    beats.apply(every("slow", 2, overlap=Overlap.SKIP))
    beat = beats.beat()
    beat.tick()
    tick_through(beats, beat, 6)
    assert beats.run_keys("slow") == keys_at("slow", 2)
    [record] = not_run(beats, "slow")
    assert (record.reason, record.count) == (SkipReason.OVERLAP, 2)
    beats.finish(keys_at("slow", 2)[0])
    tick_through(beats, beat, 2)
    assert beats.run_keys("slow") == keys_at("slow", 2, 8)


def test_overlap_buffer_one_releases_one_fire_when_the_run_finishes(beats: Beats) -> None:
    beats.apply(every("slow", 2, overlap=Overlap.BUFFER_ONE))
    beat = beats.beat()
    beat.tick()
    tick_through(beats, beat, 6)  # fires 2, 4, 6: 2 runs, 4 waits, 6 is dropped
    assert beats.run_keys("slow") == keys_at("slow", 2)
    outcomes = [(r.outcome, r.reason) for r in reversed(not_run(beats, "slow"))]
    assert outcomes == [(FireOutcome.BUFFERED, None), (FireOutcome.SKIPPED, SkipReason.OVERLAP)]
    beats.finish(keys_at("slow", 2)[0])
    tick_through(beats, beat, 1)  # the next reload sees the run finished
    assert beats.run_keys("slow") == keys_at("slow", 2, 4)
    with beats.engine.connect() as conn:
        assert catalog.get(conn, "slow").pending_fire_at is None


def test_overlap_cancel_other_finishes_the_running_run(beats: Beats) -> None:
    beats.apply(every("slow", 2, overlap=Overlap.CANCEL_OTHER))
    beat = beats.beat()
    beat.tick()
    tick_through(beats, beat, 4)
    first, second = keys_at("slow", 2, 4)
    assert beats.run_keys("slow") == [first, second]
    statuses = beats.statuses()
    assert (statuses[first], statuses[second]) == ("cancelled", "queued")


def test_paused_fires_are_counted_in_one_record_and_resume_does_not_catch_up(
    beats: Beats,
) -> None:
    beats.apply(every("pulse", catchup=Catchup.ALL))
    beat = beats.beat()
    beat.tick()
    tick_through(beats, beat, 2)
    with beats.engine.begin() as conn:
        catalog.set_paused(conn, "pulse", True, "maintenance", beats.clock())
    tick_through(beats, beat, 10)
    [paused] = not_run(beats, "pulse")
    assert paused.reason is SkipReason.PAUSED and paused.count >= 8
    with beats.engine.begin() as conn:
        catalog.set_paused(conn, "pulse", False, "", beats.clock())
    tick_through(beats, beat, 3)
    started = beats.run_keys("pulse")
    assert started[:2] == keys_at("pulse", 1, 2)
    assert started[2:] == keys_at("pulse", 13, 14, 15)


def test_max_runs_stops_the_timer_and_says_why(beats: Beats) -> None:
    beats.apply(every("twice", max_runs=2))
    beat = beats.beat()
    beat.tick()
    tick_through(beats, beat, 5)
    assert beats.run_keys("twice") == keys_at("twice", 1, 2)
    [record] = not_run(beats, "twice")
    assert (record.reason, record.count) == (SkipReason.MAX_RUNS, 3)


def test_a_schedule_deleted_and_defined_again_starts_afresh(beats: Beats) -> None:
    """Its old run count would otherwise stop a max_runs schedule for good."""
    twice = every("twice", max_runs=2)
    beats.apply(twice)
    beat = beats.beat()
    beat.tick()
    tick_through(beats, beat, 3)
    assert beats.run_keys("twice") == keys_at("twice", 1, 2)
    with beats.engine.begin() as conn:
        catalog.set_pending(conn, "twice", T0)  # a buffered fire the old one left
        catalog.apply(conn, [], beats.clock())  # deleted
    tick_through(beats, beat, 1)
    with beats.engine.begin() as conn:
        catalog.apply(conn, [twice], beats.clock())  # defined again
        again = catalog.get(conn, "twice")
    assert (again.runs_fired, again.last_fire_at, again.pending_fire_at) == (0, None, None)
    tick_through(beats, beat, 3)
    assert beats.run_keys("twice") == keys_at("twice", 1, 2, 5, 6)


def test_an_applied_edit_changes_the_next_fire_without_restart(beats: Beats) -> None:
    beats.apply(every("pulse", 10))
    beat = beats.beat()
    beat.tick()
    tick_through(beats, beat, 10)
    assert beats.run_keys("pulse") == keys_at("pulse", 10)
    beats.apply(every("pulse", 3))  # applied at T0+10
    tick_through(beats, beat, 10)
    assert beats.run_keys("pulse") == keys_at("pulse", 10, 12, 15, 18)


def test_an_edited_cron_zone_moves_the_next_fire_of_that_schedule_only(beats: Beats) -> None:
    # Start-up parses each stored trigger once and shares it between schedules:
    # an edit of one schedule's trigger after start must not leak into the others.
    def daily(name: str, zone: str) -> Schedule:
        trigger = Cron("0 14 * * *", zone)
        return Schedule(
            name=name, agent="demo", tenant="acme", trigger=trigger, overlap=Overlap.ALLOW_ALL
        )

    beats.apply(daily("kept", "Europe/Berlin"), daily("moved", "Europe/Berlin"))  # 13:00 UTC
    beat = beats.beat()
    beat.tick()
    beats.clock.advance(60)
    beats.apply(daily("moved", "Europe/London"))  # 14:00 UTC
    beats.clock.advance(3600)
    beat.tick()
    assert beats.run_keys() == [run_key("kept", T0 + timedelta(hours=1))]
    beats.clock.advance(3600)
    beat.tick()
    assert beats.run_keys("moved") == [run_key("moved", T0 + timedelta(hours=2))]
    restarted = beats.beat()  # a new leader reads the edit from the database
    beat.close()
    for hour in (1, 2):
        beats.clock.at = T0 + timedelta(days=1, hours=hour, seconds=1)
        restarted.tick()
    assert beats.run_keys() == [
        run_key("kept", T0 + timedelta(hours=1)),
        run_key("moved", T0 + timedelta(hours=2)),
        run_key("kept", T0 + timedelta(days=1, hours=1)),
        run_key("moved", T0 + timedelta(days=1, hours=2)),
    ]


def test_fires_outside_active_hours_are_recorded(beats: Beats) -> None:
    from datetime import time

    office = Schedule(
        name="office",
        agent="demo",
        tenant="acme",
        trigger=Heartbeat(
            timedelta(minutes=30), active_hours=(time(12, 0), time(13, 0)), timezone="UTC"
        ),
        overlap=Overlap.ALLOW_ALL,
    )
    beats.apply(office)
    beat = beats.beat()
    beat.tick()
    beats.clock.at = T0 + timedelta(minutes=30, seconds=1)
    beat.tick()  # 12:30 runs; 13:00 .. 11:30 the next day are outside the window
    beats.clock.at = T0 + timedelta(days=1, seconds=1)
    beat.tick()
    assert beats.run_keys("office") == [run_key("office", T0 + timedelta(minutes=30))] + [
        run_key("office", T0 + timedelta(days=1))
    ]
    [record] = not_run(beats, "office")
    assert record.reason is SkipReason.INACTIVE_HOURS
    assert record.count == 46 and record.fire_time == T0 + timedelta(hours=1)


def test_cron_fires_in_its_time_zone(beats: Beats) -> None:
    beats.apply(
        Schedule(
            name="noon-berlin",
            agent="demo",
            tenant="acme",
            trigger=Cron("0 13 * * *", timezone="Europe/Berlin"),  # 12:00 UTC in March
        )
    )
    beat = beats.beat()
    beat.tick()
    beats.clock.advance(86_400)
    beat.tick()
    assert beats.run_keys("noon-berlin") == [run_key("noon-berlin", T0 + timedelta(days=1))]


def test_log_lines_for_fires_name_the_schedule(
    beats: Beats, caplog: pytest.LogCaptureFixture
) -> None:
    beats.apply(every("pulse"), every("resting", paused=True))
    beat = beats.beat()
    beat.tick()
    with caplog.at_level("INFO", logger="schedules.beat"):
        tick_through(beats, beat, 1)
    sent = [r for r in caplog.records if getattr(r, "action", "") == "beat.sent"]
    assert [(r.schedule, r.run_key) for r in sent] == [("pulse", keys_at("pulse", 1)[0])]  # type: ignore[attr-defined]
    assert "of schedule pulse" in sent[0].getMessage()
    skipped = [r for r in caplog.records if getattr(r, "action", "") == "beat.skipped"]
    assert [r.schedule for r in skipped] == ["resting"]  # type: ignore[attr-defined]
    assert "of schedule resting (paused;" in skipped[0].getMessage()


def unchecked(schedule: Schedule, **values: object) -> Schedule:
    """`schedule` with `values` set past validation: a row stored before a check."""
    for name, value in values.items():
        object.__setattr__(schedule, name, value)
    return schedule


def one_bad_among_good(beats: Beats, caplog: pytest.LogCaptureFixture, bad: Schedule) -> None:
    beats.apply(every("before"), bad, every("zafter"))
    beat = beats.beat()
    beat.tick()
    with caplog.at_level("ERROR", logger="schedules.beat"):
        tick_through(beats, beat, 2)
    assert beats.run_keys("before") == keys_at("before", 1, 2)
    assert beats.run_keys("zafter") == keys_at("zafter", 1, 2)
    assert beats.run_keys("bad") == []
    refused = [r for r in caplog.records if getattr(r, "action", "") == "beat.refused"]
    assert [r.run_key for r in refused] == keys_at("bad", 1, 2)  # type: ignore[attr-defined]
    [skipped] = not_run(beats, "bad")
    assert (skipped.reason, skipped.count) == (SkipReason.REFUSED, 2)
    assert "could not be stored" in skipped.detail
    with beats.engine.connect() as conn:
        assert catalog.get(conn, "bad").last_fire_at == T0 + timedelta(seconds=2)  # moved on


def test_a_schedule_whose_run_is_refused_is_skipped_and_the_others_fire(
    beats: Beats, caplog: pytest.LogCaptureFixture
) -> None:
    one_bad_among_good(beats, caplog, unchecked(every("bad"), payload={"n": float("nan")}))


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_a_stored_nul_fails_only_its_own_schedule_on_postgresql(
    beats: Beats, caplog: pytest.LogCaptureFixture
) -> None:
    """PostgreSQL text cannot hold a NUL: such a row failed every tick of the beat."""
    one_bad_among_good(beats, caplog, unchecked(every("bad"), user="ana\x00"))
    assert "cannot contain NUL" in not_run(beats, "bad")[0].detail
