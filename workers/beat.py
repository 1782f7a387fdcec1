"""The beat scheduler wired to nightshift: `celery -A workers.app beat -S workers.beat:Scheduler`.

This is the composition root for `schedules/`: `CeleryRuns` is the `RunPort`
through which the beat and `schedules.api` reach runs. Fires become runs through
`enqueue`, which creates the run row (unique `schedule@fire-time`) before
sending, so a restarted or second beat cannot start the same run twice.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Sequence
from datetime import datetime, timedelta

from celery import Celery
from sqlalchemy import Engine, exc, select, update

from schedules.api import Schedules
from schedules.beat import DatabaseScheduler
from schedules.fires import Fire, Origin
from schedules.ports import RunPort, RunsRefusedError, RunSummary
from workers import runs
from workers.enqueue import enqueue, task_id
from workers.runs import RunRequest, RunStatus
from workers.runtime import runtime_of
from workers.tables import runs as runs_table

log = logging.getLogger(__name__)

_ACTIVE = (RunStatus.QUEUED.value, RunStatus.RUNNING.value)
CANCELLED_PREFIX = "cancelled: "
ENQUEUE_CHUNK = 100


class Scheduler(DatabaseScheduler):
    def setup_schedule(self) -> None:
        settings = self.app.nightshift_settings
        self.lease_ttl = timedelta(seconds=settings.beat_lease_seconds)
        super().setup_schedule()

    def open_engine(self) -> Engine:
        return runtime_of(self.app).engine

    def open_runs(self) -> RunPort:
        return CeleryRuns(self.app)


def schedules_api(app: Celery, engine: Engine | None = None, actor: str = "api") -> Schedules:
    """The schedule operations (`schedules list/show/pause/trigger/backfill …`) for `app`."""
    engine = engine or runtime_of(app).engine
    return Schedules(engine, CeleryRuns(app, engine), actor=actor)


class CeleryRuns:
    """Runs as `schedules/` sees them: `ns_runs` rows and Celery tasks."""

    def __init__(self, app: Celery, engine: Engine | None = None) -> None:
        self.app = app
        self.engine = engine or runtime_of(app).engine

    def enqueue(self, fires: Sequence[Fire], now: datetime) -> list[str]:
        # Chunks keep one multi-row INSERT under SQLite's limit of 32,766 bound
        # parameters (a run row has 15): a burst may hold thousands of fires.
        # A chunk the store refuses created nothing (one transaction); it is tried
        # again fire by fire, so one bad schedule costs its own fires only.
        created: list[str] = []
        refused: dict[str, str] = {}
        for start in range(0, len(fires), ENQUEUE_CHUNK):
            chunk = fires[start : start + ENQUEUE_CHUNK]
            try:
                created += enqueue(self.app, [request_for(f) for f in chunk], now)
            except REFUSALS:
                for fire in chunk:
                    try:
                        created += enqueue(self.app, [request_for(fire)], now)
                    except REFUSALS as error:
                        refused[fire.run_key] = refusal(error)
        if refused:
            raise RunsRefusedError(created, refused)
        return created

    def active(self, schedules: Collection[str]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        names = list(schedules)
        with self.engine.connect() as conn:
            for start in range(0, len(names), 500):
                query = (
                    select(runs_table.c.schedule, runs_table.c.key)
                    .where(
                        runs_table.c.schedule.in_(names[start : start + 500]),
                        runs_table.c.status.in_(_ACTIVE),
                    )
                    .order_by(runs_table.c.enqueued_at)
                )
                for schedule, key in conn.execute(query):
                    found.setdefault(schedule, []).append(key)
        return found

    def cancel(self, keys: Sequence[str], reason: str, now: datetime) -> None:
        # Finish the row first: the reaper must not re-enqueue it, and a late
        # delivery must find nothing to claim. Then terminate the task if it runs.
        with self.engine.begin() as conn:
            conn.execute(
                update(runs_table)
                .where(runs_table.c.key.in_(list(keys)), runs_table.c.status.in_(_ACTIVE))
                .values(
                    status=RunStatus.CANCELLED.value,
                    finished_at=now,
                    lease_expires_at=None,
                    error=CANCELLED_PREFIX + reason,
                )
            )
        for key in keys:
            self.app.control.revoke(task_id(key), terminate=True)
            schedule = key.rpartition("@")[0]  # a run key is schedule@fire-time
            log.warning(
                "cancelled run %s of schedule %s: %s",
                key,
                schedule,
                reason,
                extra={"action": "beat.cancel", "schedule": schedule, "run_key": key},
            )

    def recent(self, schedule: str, limit: int) -> list[RunSummary]:
        with self.engine.connect() as conn:
            found = runs.recent(conn, schedule=schedule, limit=limit)
        return [
            RunSummary(
                key=r.key,
                status=r.status.value,
                fire_time=r.fire_time,
                enqueued_at=r.enqueued_at,
                finished_at=r.finished_at,
                note=(r.summary or r.error)[:120],
            )
            for r in found
        ]


REFUSALS = (ValueError, TypeError, exc.DataError, exc.IntegrityError)
"""What creating a run raises when the request holds what the store cannot keep (a
NUL in PostgreSQL text, a tenant longer than its column, a payload that is not
JSON), as opposed to the store being out of reach, which the caller handles."""


def refusal(error: Exception) -> str:
    """Why a run was refused, in one line: the driver's message, never the statement
    or its parameters (which hold the very values refused)."""
    cause = error.orig if isinstance(error, exc.DBAPIError) and error.orig else error
    lines = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {lines[0] if lines else ''}"[:300]


def request_for(fire: Fire) -> RunRequest:
    s = fire.schedule
    return RunRequest(
        key=fire.run_key,
        agent=s.agent,
        tenant=s.tenant,
        user=s.user,
        schedule=s.name,
        goal=s.goal,
        trigger_kind="manual" if fire.origin is Origin.TRIGGER else s.kind,
        trigger_origin="private" if s.user else "api",
        fire_time=fire.fire_time,
        payload=dict(s.payload),
        time_limit=int(s.time_limit / timedelta(seconds=1)),
    )
