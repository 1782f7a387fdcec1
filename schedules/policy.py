"""What the beat does with due fires: the catch-up and overlap policies, as pure
functions of the fires, `now` and the state of the schedule's earlier runs.

Catch-up. A fire handled more than `grace` after its time was *missed* (the beat
was down, was standby while the leader died, or fell behind). Missed fires older
than the schedule's `catchup_window` never run. Of those within the window,
`catchup = "none"` runs none, `"latest"` runs only the newest (and none if an on-time
fire is due too), `"all"` runs each. Nothing is dropped silently: each dropped fire
comes back with the reason to record.

Overlap. When a fire finds an earlier run of its schedule still queued or running,
`skip` drops the fire, `buffer_one` keeps it waiting (at most one; it runs when the
earlier run finishes), `allow_all` runs it anyway, and `cancel_other` cancels the
running ones and runs the new fire.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from schedules.definition import Catchup, Overlap, Schedule
from schedules.fires import Fire, FireOutcome, FireRecord, Origin, SkipReason

GRACE = timedelta(seconds=5)
"""How late a fire may be handled and still count as on time."""


@dataclass(frozen=True, slots=True)
class Dropped:
    fire_time: datetime
    reason: SkipReason
    detail: str


def catch_up(
    fires: Sequence[datetime],
    now: datetime,
    catchup: Catchup,
    window: timedelta,
    grace: timedelta = GRACE,
) -> tuple[list[datetime], list[Dropped]]:
    """Split due `fires` (oldest first) into those to run and those dropped, with why."""
    oldest_allowed = now - max(window, grace)
    on_time = [f for f in fires if now - f <= grace]
    missed = [f for f in fires if now - f > grace and f >= oldest_allowed]
    dropped = [
        Dropped(f, SkipReason.CATCHUP_WINDOW, f"missed by more than the catch-up window {window}")
        for f in fires
        if f < oldest_allowed
    ]
    if catchup is Catchup.ALL:
        return missed + on_time, dropped
    keep: list[datetime] = []
    if catchup is Catchup.LATEST and missed and not on_time:
        keep = [missed[-1]]
    why = "catchup none" if catchup is Catchup.NONE else "catchup latest: a later fire runs"
    dropped += [Dropped(f, SkipReason.CATCHUP_POLICY, why) for f in missed if f not in keep]
    return keep + on_time, dropped


class Action(enum.StrEnum):
    RUN = "run"
    SKIP = "skip"
    BUFFER = "buffer"
    CANCEL_AND_RUN = "cancel_and_run"


def on_overlap(policy: Overlap, active: Sequence[str], pending: datetime | None) -> Action:
    """What to do with a new fire, given the run keys still active and a buffered fire."""
    if not active or policy is Overlap.ALLOW_ALL:
        return Action.RUN
    if policy is Overlap.CANCEL_OTHER:
        return Action.CANCEL_AND_RUN
    if policy is Overlap.BUFFER_ONE and pending is None:
        return Action.BUFFER
    return Action.SKIP


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with one schedule's due fires: runs to start, runs to cancel first,
    fires to record as buffered or skipped, and the buffered fire afterwards."""

    runs: tuple[Fire, ...]
    cancel: tuple[str, ...]
    records: tuple[FireRecord, ...]
    pending: datetime | None
    released: datetime | None  # the buffered fire that now runs, if any


def decide(
    schedule: Schedule,
    fire_times: Sequence[datetime],
    *,
    active: Sequence[str],
    paused: bool = False,
    runs_fired: int = 0,
    pending: datetime | None = None,
    origin: Origin = Origin.BEAT,
    overlap: Overlap | None = None,
) -> Decision:
    """Apply paused, max_runs and the overlap policy to `fire_times` (oldest first).

    `active` are the schedule's run keys still queued or running; a fire that runs
    counts as active for the fires after it. A buffered fire whose blocker is gone
    is released first.
    """
    policy = overlap or schedule.overlap
    running = list(active)
    runs: list[Fire] = []
    cancel: list[str] = []
    records: list[FireRecord] = []
    released = None
    if pending is not None and not running and not paused:
        released, pending = pending, None
        runs.append(Fire(schedule, released, origin))
        running.append(runs[-1].run_key)

    def skip(at: datetime, reason: SkipReason, detail: str) -> None:
        records.append(
            FireRecord(schedule.name, at, FireOutcome.SKIPPED, reason, "", origin, detail)
        )

    for at in fire_times:
        if paused:
            skip(at, SkipReason.PAUSED, "")
            continue
        if schedule.max_runs is not None and runs_fired + len(runs) >= schedule.max_runs:
            skip(at, SkipReason.MAX_RUNS, f"max_runs {schedule.max_runs} reached")
            continue
        action = on_overlap(policy, running, pending)
        if action is Action.SKIP:
            waiting = " and a fire is already buffered" if pending else ""
            skip(at, SkipReason.OVERLAP, f"{policy}: {running[-1]} still going{waiting}")
            continue
        if action is Action.BUFFER:
            pending = at
            records.append(
                FireRecord(
                    schedule.name,
                    at,
                    FireOutcome.BUFFERED,
                    None,
                    "",
                    origin,
                    f"waits for {running[-1]}",
                )
            )
            continue
        if action is Action.CANCEL_AND_RUN:
            planned = {f.run_key for f in runs}
            for earlier in runs:  # not started yet: replaced rather than started and cancelled
                skip(
                    earlier.fire_time, SkipReason.OVERLAP, "cancel_other: a later fire replaced it"
                )
            cancel += [k for k in running if k not in planned and k not in cancel]
            runs, running = [], []
        runs.append(Fire(schedule, at, origin))
        running.append(runs[-1].run_key)
    return Decision(tuple(runs), tuple(cancel), tuple(records), pending, released)
