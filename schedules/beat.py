"""A Celery beat scheduler that reads schedules from the database and leads alone.

Celery's own scheduler walks every entry on every tick. This one keeps a heap of
next fire times, so an idle tick is a peek at the heap top and a due fire costs
O(log n); every fire due in a tick is decided and sent as one batch. Applied
edits are picked up by polling a revision number every `reload_seconds`.

Only the holder of the database lease (`schedules.lease`) fires; every other beat
is a standby that tries to take the lease about once a second and, when it
does, rebuilds its heap from the database and continues from each schedule's
`last_fire_at`. Fires missed meanwhile go through the catch-up policy, fires
that find a previous run going through the overlap policy (`schedules.policy`),
and every fire's fate is recorded (`schedules.fires`). Runs are created through
`RunPort.enqueue`, which creates the unique run row before sending: what a dead
leader already sent is never sent again.

Subclasses supply the outside effects: `open_engine()` and `open_runs()` (the
composition root in `workers/beat.py`). Tests drive `tick()` with an injected
`now()`. The static `beat_schedule` entries of the Celery app (maintenance) are
sent by the leader only, as Celery's base class does.
"""

from __future__ import annotations

import heapq
import logging
import os
import signal
import socket
import threading
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

from celery.beat import Scheduler
from sqlalchemy import Engine
from sqlalchemy.exc import DBAPIError

from schedules import catalog, lease, timing
from schedules.catalog import AppliedSchedule, Progress
from schedules.definition import Heartbeat, Overlap, Schedule
from schedules.fires import (
    Fire,
    FireOutcome,
    FireRecord,
    SkipReason,
    record,
    refused_record,
    run_key,
)
from schedules.policy import GRACE, catch_up, decide
from schedules.ports import RunPort, enqueue_fires

__all__ = ["DatabaseScheduler", "Fire", "run_key"]

log = logging.getLogger(__name__)

_MICROSECOND = timedelta(microseconds=1)
COUNT_LIMIT = 1_000
"""Missed fires counted one by one before a catch-up record says "at least"."""


@contextmanager
def _signals_held() -> Iterator[None]:
    """Hold SIGTERM and SIGINT until the block ends, then deliver the first one.

    Celery beat answers SIGTERM by raising SystemExit wherever the main thread is.
    Inside `fire_due` that could fall between creating a run row and sending it
    (the reaper would resend it, a minute later), so a stopping beat finishes
    the tick it is in, then stops.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # an embedded beat (`worker -B`) in a thread: signals go elsewhere
        return
    caught: list[int] = []
    held = (signal.SIGTERM, signal.SIGINT)
    previous = {s: signal.signal(s, lambda signum, _frame: caught.append(signum)) for s in held}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        if caught:
            signal.raise_signal(caught[0])


class _Entry(NamedTuple):
    at_ts: float
    name: str
    revision: int
    at: datetime
    after: datetime  # the fire was computed as the first one after this


class DatabaseScheduler(Scheduler):
    """Heap-ordered, leader-elected beat over the `ns_schedules` table."""

    reload_seconds = 2.0
    lease_ttl = timedelta(seconds=10)
    standby_poll = timedelta(seconds=1)
    grace = GRACE

    # -- supplied by the composition root -------------------------------------

    def open_engine(self) -> Engine:
        raise NotImplementedError

    def open_runs(self) -> RunPort:
        raise NotImplementedError

    def now(self) -> datetime:
        return datetime.now(UTC)

    # -- Celery's hooks --------------------------------------------------------

    def setup_schedule(self) -> None:
        super().setup_schedule()
        self.reload_seconds = float(self.app.conf.beat_max_loop_interval or self.reload_seconds)
        self.engine = self.open_engine()
        self.runs = self.open_runs()
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.leading = False
        self._term = 0
        self._lease_check_at: datetime | None = None
        self._reload_at: datetime | None = None
        self._entries: list[_Entry] = []
        self._applied: dict[str, AppliedSchedule] = {}
        self._buffered: set[str] = set()
        self._revision = 0

    def tick(self, *args: Any, **kwargs: Any) -> float:
        now = self.now()
        try:
            if not self._lead(now):
                return self.standby_poll.total_seconds()
            static_delay = super().tick(*args, **kwargs)
            if self._reload_at is None or now >= self._reload_at:
                self.reload(now)
            with _signals_held():
                self.fire_due(now)
        except DBAPIError as error:
            log.warning(
                "beat cannot reach the database; standing by: %s",
                str(error).splitlines()[0],
                extra={"action": "beat.db_error", "holder": self.holder},
            )
            self._step_down()
            return self.standby_poll.total_seconds()
        return self._delay(now, static_delay)

    def close(self) -> None:
        if getattr(self, "leading", False):
            try:
                with self.engine.begin() as conn:
                    lease.release(conn, self.holder, self.now())
                log.info("beat released the lease", extra={"action": "beat.release"})
            except DBAPIError:
                log.warning("beat could not release the lease", exc_info=True)
            self.leading = False
        elif hasattr(self, "holder"):
            try:
                with self.engine.begin() as conn:
                    lease.leave_standby(conn, self.holder)
            except DBAPIError:  # its row lapses on its own
                log.warning("beat could not leave the standby list", exc_info=True)
        super().close()

    @property
    def info(self) -> str:
        applied = getattr(self, "_applied", None)
        if applied is None:
            return "    . db schedules -> (loaded when leading)"
        role = "leader" if self.leading else "standby"
        return f"    . db schedules -> {len(applied)} ({role}, heap {len(self._entries)})"

    # -- leadership ------------------------------------------------------------

    def _lead(self, now: datetime) -> bool:
        if self._lease_check_at is not None and now < self._lease_check_at:
            return self.leading
        with self.engine.begin() as conn:
            held = lease.acquire(conn, self.holder, now, self.lease_ttl)
            if held is None:  # ready to take over, for `nightshift status` to name
                lease.stand_by(conn, self.holder, now, self.lease_ttl)
            elif not self.leading:
                lease.leave_standby(conn, self.holder)
        if held is None:
            if self.leading:
                log.warning("beat lost the lease", extra={"action": "beat.lost_lease"})
                self._step_down()
            self._lease_check_at = now + self.standby_poll
            return False
        if not self.leading or held.term != self._term:
            log.info(
                "beat leads (term %d); loading schedules",
                held.term,
                extra={"action": "beat.lead", "holder": self.holder, "term": held.term},
            )
            self.leading, self._term = True, held.term
            self.rebuild(now)
        self._lease_check_at = now + self.lease_ttl / 3
        return True

    def _step_down(self) -> None:
        self.leading = False
        self._lease_check_at = None
        self._entries, self._applied, self._buffered = [], {}, set()

    def _delay(self, now: datetime, static_delay: float) -> float:
        horizon = [static_delay, self.reload_seconds]
        if self._entries:
            horizon.append(self._entries[0].at_ts - now.timestamp())
        for at in (self._reload_at, self._lease_check_at):
            if at is not None:
                horizon.append((at - now).total_seconds())
        return max(0.0, min(horizon))

    # -- the heap --------------------------------------------------------------

    def rebuild(self, now: datetime) -> None:
        """Load every schedule and its progress: on start and on taking over."""
        with catalog.collector_paused():
            with self.engine.connect() as conn:
                revision = catalog.max_revision(conn)  # first: later edits are re-read
                applied = catalog.all_schedules(conn, in_name_order=False)
            self._applied = {a.name: a for a in applied}
            self._buffered = {a.name for a in applied if a.pending_fire_at is not None}
            self._revision = revision
            self._entries = self._entries_for(applied, now)
            heapq.heapify(self._entries)
        self._reload_at = now + timedelta(seconds=self.reload_seconds)
        self.release_buffered(now)

    def reload(self, now: datetime) -> None:
        """Apply every schedule change committed since the last reload, and release
        buffered fires whose blocking run finished."""
        with self.engine.connect() as conn:
            changed = catalog.changed_since(conn, self._revision)
        live: list[AppliedSchedule] = []
        for applied in changed:
            self._revision = max(self._revision, applied.revision)
            if applied.deleted:
                self._applied.pop(applied.name, None)
                self._buffered.discard(applied.name)
                continue
            self._applied[applied.name] = applied
            if applied.pending_fire_at is not None:
                self._buffered.add(applied.name)
            live.append(applied)
        for entry in self._entries_for(live, now):
            heapq.heappush(self._entries, entry)
        self._reload_at = now + timedelta(seconds=self.reload_seconds)
        if changed:
            log.info(
                "beat loaded %d schedule changes (revision %d)",
                len(changed),
                self._revision,
                extra={"action": "beat.reload", "count": len(changed)},
            )
        self.release_buffered(now)

    def _entries_for(self, applied: Sequence[AppliedSchedule], now: datetime) -> list[_Entry]:
        """The heap entries of schedules just read: their first fires, computed together."""
        asks = [(a.schedule, _resume_after(a, now)) for a in applied]
        fires = timing.first_fires(asks)
        return [
            _Entry(at.timestamp(), a.name, a.revision, at, after)
            for a, (_, after), at in zip(applied, asks, fires, strict=True)
            if at is not None
        ]

    def _next(self, applied: AppliedSchedule, after: datetime) -> _Entry | None:
        at = timing.next_fire(applied.schedule, after)
        if at is None:
            return None
        return _Entry(at.timestamp(), applied.name, applied.revision, at, after)

    # -- firing ----------------------------------------------------------------

    def fire_due(self, now: datetime) -> None:
        """Decide and send every fire due at `now`, then record what became of each."""
        due: dict[str, list[datetime]] = {}
        records: list[FireRecord] = []
        handled: dict[str, datetime] = {}
        stamp = now.timestamp()
        while self._entries and self._entries[0].at_ts <= stamp:
            entry = heapq.heappop(self._entries)
            applied = self._applied.get(entry.name)
            if applied is None or applied.revision != entry.revision:
                continue  # superseded by an edit, or deleted
            records += self._inactive_hours(applied.schedule, entry)
            oldest = now - max(applied.schedule.catchup_window, self.grace)
            if entry.at < oldest:
                skipped, resume = self._outside_window(applied.schedule, entry.at, oldest)
                records.append(skipped)
                handled[entry.name] = resume
                nxt = self._next(applied, resume)
            else:
                due.setdefault(entry.name, []).append(entry.at)
                handled[entry.name] = entry.at
                nxt = self._next(applied, entry.at)
            if nxt is not None:
                heapq.heappush(self._entries, nxt)
        if due:
            self._decide_and_send(now, due, records, handled)
        elif records:
            self._commit(now, records, [Progress(n, last_fire_at=t) for n, t in handled.items()])

    def release_buffered(self, now: datetime) -> None:
        """Start buffered fires (overlap buffer_one) whose blocking run has finished."""
        if self._buffered:
            self._decide_and_send(now, {name: [] for name in sorted(self._buffered)}, [], {})

    def _decide_and_send(
        self,
        now: datetime,
        due: dict[str, list[datetime]],
        records: list[FireRecord],
        handled: dict[str, datetime],
    ) -> None:
        kept: dict[str, list[datetime]] = {}
        for name, times in due.items():
            s = self._applied[name].schedule
            kept[name], dropped = catch_up(times, now, s.catchup, s.catchup_window, self.grace)
            records += [
                FireRecord(name, d.fire_time, FireOutcome.SKIPPED, d.reason, detail=d.detail)
                for d in dropped
            ]
        asking = [n for n, t in kept.items() if self._needs_run_state(n, t)]
        active = self.runs.active(asking) if asking else {}
        fires: list[Fire] = []
        cancel: list[str] = []
        progress: dict[str, Progress] = {}
        for name, times in kept.items():
            a = self._applied[name]
            d = decide(
                a.schedule,
                times,
                active=active.get(name, ()),
                paused=a.paused,
                runs_fired=a.runs_fired,
                pending=a.pending_fire_at,
            )
            fires += d.runs
            cancel += d.cancel
            records += d.records
            if d.pending != a.pending_fire_at:
                progress[name] = Progress(name, pending=d.pending, set_pending=True)
        if cancel:
            self.runs.cancel(cancel, "overlap cancel_other: a newer fire replaces it", now)
        created, refused = enqueue_fires(self.runs, fires, now)
        records += [_run_record(f, f.run_key in created) for f in fires if f.run_key not in refused]
        records += [self._refused(f, refused[f.run_key]) for f in fires if f.run_key in refused]
        for f in fires:
            if f.run_key in created:
                log.info(
                    "beat sent run %s of schedule %s (fire %s)",
                    f.run_key,
                    f.schedule.name,
                    f.fire_time.isoformat(),
                    extra={
                        "action": "beat.sent",
                        "schedule": f.schedule.name,
                        "fire_time": f.fire_time.isoformat(),
                        "run_key": f.run_key,
                        "holder": self.holder,
                    },
                )
        started = Counter(f.schedule.name for f in fires if f.run_key in created)
        for name in set(handled) | set(started):
            p = progress.get(name, Progress(name))
            progress[name] = replace(p, last_fire_at=handled.get(name), runs_added=started[name])
        self._commit(now, records, list(progress.values()))

    def _refused(self, fire: Fire, why: str) -> FireRecord:
        """Log a fire whose run the store refused; it is skipped (recorded, and the
        beat moves past it) so one bad schedule cannot stop the others firing."""
        log.error(
            "beat could not start run %s of schedule %s: %s; fire skipped",
            fire.run_key,
            fire.schedule.name,
            why,
            extra={
                "action": "beat.refused",
                "schedule": fire.schedule.name,
                "run_key": fire.run_key,
                "holder": self.holder,
            },
        )
        return refused_record(fire, why)

    def _needs_run_state(self, name: str, times: list[datetime]) -> bool:
        a = self._applied[name]
        return a.pending_fire_at is not None or (
            bool(times) and not a.paused and a.schedule.overlap is not Overlap.ALLOW_ALL
        )

    def _commit(self, now: datetime, records: list[FireRecord], progress: list[Progress]) -> None:
        with self.engine.begin() as conn:
            record(conn, records, now, decided_by=self.holder)
            catalog.record_progress(conn, progress)
        for p in progress:
            a = self._applied.get(p.name)
            if a is None:
                continue
            last = a.last_fire_at
            if p.last_fire_at is not None and (last is None or p.last_fire_at > last):
                last = p.last_fire_at
            pending = p.pending if p.set_pending else a.pending_fire_at
            self._applied[p.name] = replace(
                a,
                last_fire_at=last,
                runs_fired=a.runs_fired + p.runs_added,
                pending_fire_at=pending,
            )
            if pending is None:
                self._buffered.discard(p.name)
            else:
                self._buffered.add(p.name)
        _log_skipped(records)

    # -- records of fires that did not run ---------------------------------------

    def _outside_window(
        self, schedule: Schedule, first: datetime, oldest: datetime
    ) -> tuple[FireRecord, datetime]:
        """One record for the fires from `first` up to `oldest` (missed for longer than
        the catch-up window), and the instant to continue after."""
        missed = timing.fires_between(schedule, first - _MICROSECOND, oldest, limit=COUNT_LIMIT)
        missed = missed or [first]
        counted_all = len(missed) < COUNT_LIMIT
        at_least = "" if counted_all else "at least "
        record = FireRecord(
            schedule.name,
            missed[0],
            FireOutcome.SKIPPED,
            SkipReason.CATCHUP_WINDOW,
            detail=f"{at_least}{len(missed)} fires missed by more than the catch-up window "
            f"({schedule.catchup_window})",
            last_fire_time=missed[-1],
            count=len(missed),
        )
        return record, missed[-1] if counted_all else oldest

    def _inactive_hours(self, schedule: Schedule, entry: _Entry) -> Iterable[FireRecord]:
        trigger = schedule.trigger
        if not isinstance(trigger, Heartbeat) or trigger.active_hours is None:
            return ()
        always = schedule.replace(trigger=replace(trigger, active_hours=None))
        outside = timing.fires_between(
            always, entry.after, entry.at - _MICROSECOND, limit=COUNT_LIMIT
        )
        if not outside:
            return ()
        start, end = trigger.active_hours
        return (
            FireRecord(
                schedule.name,
                outside[0],
                FireOutcome.SKIPPED,
                SkipReason.INACTIVE_HOURS,
                detail=f"outside active hours {start:%H:%M}-{end:%H:%M} {trigger.timezone}",
                last_fire_time=outside[-1],
                count=len(outside),
            ),
        )


def _resume_after(applied: AppliedSchedule, now: datetime) -> datetime:
    """Continue after the latest fire handled, or after the latest edit: an edit or a
    resume never reaches back to fires before it."""
    marks = [t for t in (applied.last_fire_at, applied.updated_at) if t is not None]
    return max(marks) if marks else now


SKIPS_NAMED = 10
"""Schedules named one log line each per tick when fires are skipped; the rest share one."""


def _log_skipped(records: list[FireRecord]) -> None:
    counts: Counter[str] = Counter()
    reasons: dict[str, set[str]] = {}
    for r in records:
        if r.outcome is FireOutcome.SKIPPED:
            counts[r.schedule] += r.count
            reasons.setdefault(r.schedule, set()).add(r.reason.value if r.reason else "skipped")
    names = sorted(counts)
    for name in names[:SKIPS_NAMED]:
        log.info(
            "beat skipped %d fires of schedule %s (%s; see `nightshift schedules show %s`)",
            counts[name],
            name,
            ", ".join(sorted(reasons[name])),
            name,
            extra={"action": "beat.skipped", "schedule": name, "count": counts[name]},
        )
    if len(names) > SKIPS_NAMED:
        rest = names[SKIPS_NAMED:]
        log.info(
            "beat skipped %d fires of %d more schedules (%s, …)",
            sum(counts[n] for n in rest),
            len(rest),
            ", ".join(rest[:3]),
            extra={"action": "beat.skipped", "schedules": len(rest)},
        )


def _run_record(fire: Fire, created: bool) -> FireRecord:
    if created:
        return FireRecord(fire.schedule.name, fire.fire_time, FireOutcome.RUN, run_key=fire.run_key)
    return FireRecord(
        fire.schedule.name,
        fire.fire_time,
        FireOutcome.DUPLICATE,
        run_key=fire.run_key,
        detail="its run key exists already (sent before); not sent again",
    )
