"""A Celery beat scheduler that reads schedules from the database.

Celery's own scheduler walks every entry on every tick. This one keeps a heap of
next fire times, so an idle tick costs a peek at the heap top and a due tick
costs O(log n) per fire; all fires due in one tick go out in one batch.
Applied edits are picked up by polling a revision number every few seconds.

Subclasses supply the two outside effects: `open_engine()` and `dispatch(fires)`
(the composition root in `workers/` turns fires into runs). The static
`beat_schedule` entries of the Celery app (maintenance) are kept by the base
class as usual.
"""

from __future__ import annotations

import heapq
import logging
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from celery.beat import Scheduler
from sqlalchemy import Engine

from schedules import catalog, timing
from schedules.catalog import AppliedSchedule
from schedules.definition import Schedule

log = logging.getLogger(__name__)


def run_key(name: str, fire_time: datetime) -> str:
    """The run key of a scheduled fire: `schedule@fire-time`, unique in the database."""
    return f"{name}@{fire_time.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}"


@dataclass(frozen=True, slots=True)
class Fire:
    schedule: Schedule
    fire_time: datetime

    @property
    def run_key(self) -> str:
        return run_key(self.schedule.name, self.fire_time)


class DatabaseScheduler(Scheduler):
    """Heap-ordered beat over the `ns_schedules` table."""

    reload_seconds = 2.0

    # -- supplied by the composition root -------------------------------------

    def open_engine(self) -> Engine:
        raise NotImplementedError

    def dispatch(self, fires: list[Fire]) -> None:
        raise NotImplementedError

    def now(self) -> datetime:
        return datetime.now(UTC)

    # -- Celery's hooks --------------------------------------------------------

    def setup_schedule(self) -> None:
        super().setup_schedule()
        self.reload_seconds = float(self.app.conf.beat_max_loop_interval or self.reload_seconds)
        self.engine = self.open_engine()
        self._fires: list[tuple[float, str, int]] = []
        self._applied: dict[str, AppliedSchedule] = {}
        self._revision = 0
        self._reloaded_at = 0.0
        self.reload()

    def tick(self, *args: Any, **kwargs: Any) -> float:
        static_delay = super().tick(*args, **kwargs)
        if time.monotonic() - self._reloaded_at >= self.reload_seconds:
            self.reload()
        now = self.now()
        fires = self.pop_due(now)
        if fires:
            self.dispatch(fires)
            with self.engine.begin() as conn:
                catalog.record_fires(conn, ((f.schedule.name, f.fire_time) for f in fires))
        until_next = self._fires[0][0] - now.timestamp() if self._fires else self.reload_seconds
        return max(0.0, min(static_delay, until_next, self.reload_seconds))

    # -- the heap --------------------------------------------------------------

    def reload(self) -> None:
        """Apply every schedule change committed since the last reload."""
        with self.engine.connect() as conn:
            changed = catalog.changed_since(conn, self._revision)
        now = self.now()
        for applied in changed:
            self._revision = max(self._revision, applied.revision)
            if applied.deleted:
                self._applied.pop(applied.name, None)
                continue
            self._applied[applied.name] = applied
            self._push_next(applied, after=max(now, applied.last_fire_at or now))
        self._reloaded_at = time.monotonic()
        if changed:
            log.info(
                "beat loaded %d schedule changes (revision %d)",
                len(changed),
                self._revision,
                extra={"action": "beat.reload", "count": len(changed)},
            )

    def pop_due(self, now: datetime) -> list[Fire]:
        due: list[Fire] = []
        stamp = now.timestamp()
        while self._fires and self._fires[0][0] <= stamp:
            at, name, revision = heapq.heappop(self._fires)
            applied = self._applied.get(name)
            if applied is None or applied.revision != revision:
                continue  # superseded by an edit or deleted
            fire_time = datetime.fromtimestamp(at, UTC)
            if self._may_fire(applied):
                due.append(Fire(applied.schedule, fire_time))
                applied = self._count_fire(applied, fire_time)
            self._push_next(applied, after=fire_time)
        return due

    def _push_next(self, applied: AppliedSchedule, after: datetime) -> None:
        nxt = timing.next_fire(applied.schedule, after)
        if nxt is not None:
            heapq.heappush(self._fires, (nxt.timestamp(), applied.name, applied.revision))

    def _may_fire(self, applied: AppliedSchedule) -> bool:
        limit = applied.schedule.max_runs
        return not applied.paused and (limit is None or applied.runs_fired < limit)

    def _count_fire(self, applied: AppliedSchedule, at: datetime) -> AppliedSchedule:
        updated = replace(applied, runs_fired=applied.runs_fired + 1, last_fire_at=at)
        self._applied[applied.name] = updated
        return updated

    @property
    def info(self) -> str:
        applied = getattr(self, "_applied", None)
        if applied is None:
            return "    . db schedules -> (loaded at start)"
        return f"    . db schedules -> {len(applied)} (heap {len(self._fires)})"
