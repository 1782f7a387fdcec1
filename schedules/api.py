"""Schedule operations from Python: what `nightshift schedules …` calls.

Example:
    >>> from workers.beat import schedules_api
    >>> api = schedules_api(app)
    >>> api.pause("digest", note="mail server migration")
    >>> api.backfill("digest", start, end)  # runs the fires in [start, end]

`Schedules` needs an engine and a `RunPort` (`workers.beat.CeleryRuns` in
nightshift). Trigger and backfill go through the same overlap decision as the
beat, use the same run keys (`schedule@fire-time`, so a backfilled fire that
already ran is not run again) and record every fire in the fires table.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import Engine

from schedules import catalog, fires, timing
from schedules.catalog import AppliedSchedule, Change
from schedules.definition import Cron, Heartbeat, Overlap, Schedule, text_problem
from schedules.errors import DefinitionError
from schedules.fires import FireOutcome, FireRecord, Origin
from schedules.policy import decide
from schedules.ports import RunPort, RunSummary, enqueue_fires

MAX_BACKFILL = 10_000
MAX_FIRES = 1_000
"""The most upcoming fires `next` and `show` compute: more is a mistake, and a
large count of a sparse or never-matching schedule costs seconds per thousand."""


class BackfillTooLargeError(ValueError):
    """A backfill range holds more fires than one call may start."""


class BackfillRangeError(ValueError):
    """A backfill range that ends before it starts, or ends after now: a fire that
    is still to come is the timer's to run, and a backfilled one would take its run
    key, so the timer would later drop it as a duplicate."""


def zone_of(schedule: Schedule) -> ZoneInfo:
    trigger = schedule.trigger
    name = trigger.timezone if isinstance(trigger, Cron | Heartbeat) else "UTC"
    return ZoneInfo(name)


def not_firing(applied: AppliedSchedule) -> str:
    """Why the timer will not fire `applied`, whatever its definition says, or ""
    when it may: paused (with the note), or its `max_runs` used up."""
    if applied.paused:
        return f"paused ({applied.pause_note})" if applied.pause_note else "paused"
    limit = applied.schedule.max_runs
    if limit is not None and applied.runs_fired >= limit:
        return f"max_runs {limit} reached"
    return ""


@dataclass(frozen=True, slots=True)
class FireResult:
    """What a trigger or backfill did."""

    schedule: str
    started: tuple[str, ...] = ()
    existed: tuple[str, ...] = ()  # run keys that had run (or were queued) already
    buffered: datetime | None = None
    cancelled: tuple[str, ...] = ()
    skipped: tuple[FireRecord, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "schedule": self.schedule,
            "started": list(self.started),
            "existed": list(self.existed),
            "buffered": self.buffered.isoformat() if self.buffered else None,
            "cancelled": list(self.cancelled),
            "skipped": [r.to_json() for r in self.skipped],
        }


@dataclass(frozen=True, slots=True)
class Details:
    """`schedules show NAME`: the definition, the next fires, runs and fires."""

    applied: AppliedSchedule
    next_fires: tuple[datetime, ...]  # in the schedule's time zone
    runs: tuple[RunSummary, ...]
    not_run: tuple[FireRecord, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        a = self.applied
        return {
            "name": a.name,
            "definition": a.schedule.to_json(),
            "paused": a.paused,
            "pause_note": a.pause_note,
            "last_fire": a.last_fire_at.astimezone(zone_of(a.schedule)).isoformat()
            if a.last_fire_at
            else None,
            "runs_fired": a.runs_fired,
            "buffered_fire": a.pending_fire_at.isoformat() if a.pending_fire_at else None,
            "next_fires": [t.isoformat() for t in self.next_fires],
            "not_firing": not_firing(a) or None,
            "runs": [r.to_json() for r in self.runs],
            "fires_not_run": [r.to_json() for r in self.not_run],
        }


class Schedules:
    def __init__(
        self,
        engine: Engine,
        runs: RunPort,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        actor: str = "api",
    ) -> None:
        self.engine, self.runs, self.clock, self.actor = engine, runs, clock, actor

    # -- reading -------------------------------------------------------------------

    def all(
        self, *, name_glob: str | None = None, limit: int | None = None
    ) -> list[AppliedSchedule]:
        """Applied schedules in name order, optionally only names matching `name_glob`
        (shell-style `*` and `?`, case-insensitive) and only the first `limit`."""
        with self.engine.connect() as conn:
            return catalog.all_schedules(conn, name_glob=name_glob, limit=limit)

    def get(self, name: str) -> AppliedSchedule:
        with self.engine.connect() as conn:
            return catalog.get(conn, name)

    def next(self, name: str, n: int = 10, after: datetime | None = None) -> list[datetime]:
        """The next `n` fires after `after` (default now), in the schedule's time zone;
        none while it does not fire (`not_firing`: paused, or max_runs used up)."""
        applied = self.get(name)
        return [] if not_firing(applied) else self.next_for(applied, n, after)

    def next_for(
        self, applied: AppliedSchedule, n: int = 10, after: datetime | None = None
    ) -> list[datetime]:
        """The fires the definition of a schedule already read has (paused or not,
        max_runs used up or not: see `not_firing`), with no database access. `n` is
        0 to `MAX_FIRES`; anything else raises `ValueError`."""
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= MAX_FIRES:
            raise ValueError(f"n must be a whole number from 0 to {MAX_FIRES}, got {n!r}")
        schedule = applied.schedule
        zone = zone_of(schedule)
        found = timing.next_fires(schedule, after or self.clock(), n)
        return [t.astimezone(zone) for t in found]

    def first_fires(
        self, applied: Sequence[AppliedSchedule], after: datetime | None = None
    ) -> list[datetime | None]:
        """The next fire of each schedule after `after` (default now, read once), in
        its time zone; None for one that does not fire (`not_firing`) or never fires
        again. What a listing shows, computed together as the beat computes them at
        start-up."""
        after = after or self.clock()
        firing = [a for a in applied if not not_firing(a)]
        found = iter(timing.first_fires([(a.schedule, after) for a in firing]))
        fires = []
        for a in applied:
            fire = None if not_firing(a) else next(found)
            fires.append(None if fire is None else fire.astimezone(zone_of(a.schedule)))
        return fires

    def show(self, name: str, n: int = 10) -> Details:
        applied = self.get(name)
        upcoming = [] if not_firing(applied) else self.next_for(applied, n)
        with self.engine.connect() as conn:
            not_run = fires.recent(conn, name, limit=n, skipped_only=True)
        return Details(applied, tuple(upcoming), tuple(self.runs.recent(name, n)), tuple(not_run))

    # -- changing --------------------------------------------------------------------

    def apply(
        self, wanted: Sequence[Schedule], *, prune: bool = True, dry_run: bool = False
    ) -> list[Change]:
        with self.engine.begin() as conn:
            if dry_run:
                return catalog.plan(conn, wanted, prune=prune)
            return catalog.apply(conn, wanted, self.clock(), prune=prune)

    def pause(self, name: str, note: str = "") -> None:
        """Stop `name` firing until `resume`; `note` says why (one line of text, or
        `DefinitionError`)."""
        if problem := text_problem(note):
            raise DefinitionError("pause_note", f"note {problem}")
        with self.engine.begin() as conn:
            catalog.set_paused(conn, name, True, note, self.clock())

    def resume(self, name: str) -> None:
        with self.engine.begin() as conn:
            catalog.set_paused(conn, name, False, "", self.clock())

    def trigger(self, name: str, *, overlap: Overlap | None = None) -> FireResult:
        """Run the schedule now, subject to its overlap policy (or `overlap`)."""
        now = self.clock()
        return self._fire(self.get(name), [now], Origin.TRIGGER, overlap, now)

    def backfill(
        self, name: str, start: datetime, end: datetime, *, overlap: Overlap | None = None
    ) -> FireResult:
        """Run the fires the schedule had in [start, end] (at most `MAX_BACKFILL`);
        `end` may not be later than now (`BackfillRangeError`)."""
        now = self.clock()
        if end < start:
            raise BackfillRangeError(
                f"the backfill ends ({end.isoformat()}) before it starts ({start.isoformat()})"
            )
        if end > now:
            raise BackfillRangeError(
                f"the backfill ends in the future ({end.isoformat()}; now is {now.isoformat()}): "
                "it runs fires that were due, the schedule's timer runs those still to come"
            )
        applied = self.get(name)
        times = timing.fires_between(
            applied.schedule, start - timedelta(microseconds=1), end, limit=MAX_BACKFILL + 1
        )
        if len(times) > MAX_BACKFILL:
            raise BackfillTooLargeError(
                f"schedule {name!r} has more than {MAX_BACKFILL} fires between "
                f"{start.isoformat()} and {end.isoformat()}; backfill a shorter range"
            )
        return self._fire(applied, times, Origin.BACKFILL, overlap, now)

    def _fire(
        self,
        applied: AppliedSchedule,
        times: list[datetime],
        origin: Origin,
        overlap: Overlap | None,
        now: datetime,
    ) -> FireResult:
        name = applied.name
        active = self.runs.active([name]).get(name, [])
        d = decide(
            applied.schedule.replace(max_runs=None),  # max_runs limits the timer only
            times,
            active=active,
            pending=applied.pending_fire_at,
            origin=origin,
            overlap=overlap,
        )
        if d.cancel:
            self.runs.cancel(d.cancel, f"overlap cancel_other: {origin.value} replaces it", now)
        created, refused = enqueue_fires(self.runs, d.runs, now)
        records = list(d.records)
        for f in d.runs:
            if f.run_key in refused:
                records.append(fires.refused_record(f, refused[f.run_key]))
                continue
            outcome = FireOutcome.RUN if f.run_key in created else FireOutcome.DUPLICATE
            records.append(FireRecord(name, f.fire_time, outcome, run_key=f.run_key, origin=origin))
        with self.engine.begin() as conn:
            fires.record(conn, records, now, decided_by=self.actor)
            if d.pending != applied.pending_fire_at:
                catalog.set_pending(conn, name, d.pending)
        return FireResult(
            schedule=name,
            started=tuple(f.run_key for f in d.runs if f.run_key in created),
            existed=tuple(
                k for f in d.runs if (k := f.run_key) not in created and k not in refused
            ),
            buffered=d.pending if d.pending != applied.pending_fire_at else None,
            cancelled=d.cancel,
            skipped=tuple(r for r in records if r.outcome is FireOutcome.SKIPPED),
        )
