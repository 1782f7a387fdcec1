"""Catch-up and overlap decisions as pure functions of fires, `now` and run state."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedules.definition import Catchup, Heartbeat, Overlap, Schedule
from schedules.fires import FireOutcome, SkipReason, run_key
from schedules.policy import Action, catch_up, decide, on_overlap

NOW = datetime(2026, 3, 29, 1, 0, 0, tzinfo=UTC)


def ago(seconds: float) -> datetime:
    return NOW - timedelta(seconds=seconds)


def schedule(**settings: object) -> Schedule:
    return Schedule(
        name="pulse",
        agent="demo",
        tenant="acme",
        trigger=Heartbeat(timedelta(seconds=10)),
        **settings,  # type: ignore[arg-type]
    )


MISSED = [ago(250), ago(120), ago(60), ago(30)]  # the first is outside a 200 s window


@pytest.mark.parametrize(
    ("catchup", "kept"),
    [
        (Catchup.NONE, []),
        (Catchup.LATEST, [ago(30)]),
        (Catchup.ALL, [ago(120), ago(60), ago(30)]),
    ],
)
def test_catch_up_keeps_per_policy_and_says_why_for_the_rest(
    catchup: Catchup, kept: list[datetime]
) -> None:
    run, dropped = catch_up(MISSED, NOW, catchup, timedelta(seconds=200))
    assert run == kept
    assert sorted([d.fire_time for d in dropped] + run) == MISSED
    reasons = {d.fire_time: d.reason for d in dropped}
    assert reasons[ago(250)] is SkipReason.CATCHUP_WINDOW
    assert all(r is SkipReason.CATCHUP_POLICY for t, r in reasons.items() if t != ago(250))


def test_an_on_time_fire_supersedes_missed_ones_under_latest() -> None:
    run, dropped = catch_up([ago(60), ago(1)], NOW, Catchup.LATEST, timedelta(minutes=5))
    assert run == [ago(1)]
    assert [(d.fire_time, d.reason) for d in dropped] == [(ago(60), SkipReason.CATCHUP_POLICY)]


def test_fires_within_the_grace_are_on_time_even_without_catch_up() -> None:
    run, dropped = catch_up([ago(4), ago(0)], NOW, Catchup.NONE, timedelta(0))
    assert (run, dropped) == ([ago(4), ago(0)], [])


def test_a_zero_window_drops_every_late_fire_as_outside_it() -> None:
    run, dropped = catch_up([ago(6)], NOW, Catchup.ALL, timedelta(0))
    assert run == [] and [d.reason for d in dropped] == [SkipReason.CATCHUP_WINDOW]


@pytest.mark.parametrize(
    ("policy", "active", "pending", "action"),
    [
        (Overlap.SKIP, [], None, Action.RUN),
        (Overlap.SKIP, ["k"], None, Action.SKIP),
        (Overlap.BUFFER_ONE, ["k"], None, Action.BUFFER),
        (Overlap.BUFFER_ONE, ["k"], NOW, Action.SKIP),
        (Overlap.ALLOW_ALL, ["k"], None, Action.RUN),
        (Overlap.CANCEL_OTHER, ["k"], None, Action.CANCEL_AND_RUN),
        (Overlap.CANCEL_OTHER, [], None, Action.RUN),
    ],
)
def test_on_overlap(
    policy: Overlap, active: list[str], pending: datetime | None, action: Action
) -> None:
    assert on_overlap(policy, active, pending) is action


def test_skip_runs_the_first_fire_and_skips_those_it_overlaps() -> None:
    d = decide(schedule(), [ago(20), ago(10)], active=[])
    assert [f.fire_time for f in d.runs] == [ago(20)]
    assert [(r.fire_time, r.reason) for r in d.records] == [(ago(10), SkipReason.OVERLAP)]


def test_buffer_one_keeps_one_and_releases_it_once_the_run_is_gone() -> None:
    s = schedule(overlap=Overlap.BUFFER_ONE)
    d = decide(s, [ago(20), ago(10)], active=["old"])
    assert d.runs == () and d.pending == ago(20)
    assert [r.outcome for r in d.records] == [FireOutcome.BUFFERED, FireOutcome.SKIPPED]
    released = decide(s, [], active=[], pending=d.pending)
    assert [f.fire_time for f in released.runs] == [ago(20)]
    assert released.pending is None and released.released == ago(20)


def test_cancel_other_cancels_what_runs_and_starts_the_newest() -> None:
    d = decide(schedule(overlap=Overlap.CANCEL_OTHER), [ago(20), ago(10)], active=["old"])
    assert d.cancel == ("old",)
    assert [f.fire_time for f in d.runs] == [ago(10)]
    assert [(r.fire_time, r.reason) for r in d.records] == [(ago(20), SkipReason.OVERLAP)]


def test_paused_and_max_runs_are_recorded() -> None:
    paused = decide(schedule(), [ago(10)], active=[], paused=True)
    assert [r.reason for r in paused.records] == [SkipReason.PAUSED] and paused.runs == ()
    limited = decide(
        schedule(max_runs=3, overlap=Overlap.ALLOW_ALL), [ago(20), ago(10)], active=[], runs_fired=2
    )
    assert [f.run_key for f in limited.runs] == [run_key("pulse", ago(20))]
    assert [r.reason for r in limited.records] == [SkipReason.MAX_RUNS]
