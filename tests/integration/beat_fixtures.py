"""A beat on a real database with an injected clock: tests call `tick()` themselves.

Runs go through the real `workers.beat.CeleryRuns` (run rows in the database,
messages on kombu's in-memory broker), so a created run row is a sent run.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from celery import Celery
from sqlalchemy import Engine, select, update

from schedules import catalog
from schedules.definition import Schedule
from workers import schema
from workers.app import create_app
from workers.beat import CeleryRuns, Scheduler
from workers.runs import RunStatus
from workers.settings import Settings
from workers.tables import runs

T0 = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)


@dataclass
class Clock:
    at: datetime = T0

    def __call__(self) -> datetime:
        return self.at

    def advance(self, seconds: float) -> datetime:
        self.at += timedelta(seconds=seconds)
        return self.at


@dataclass
class Beats:
    """Everything a beat test needs: app, engine, clock, and beats made on demand."""

    app: Celery
    engine: Engine
    clock: Clock
    made: list[Scheduler] = field(default_factory=list)

    def beat(self) -> Scheduler:
        clock = self.clock

        class Clocked(Scheduler):
            def now(self) -> datetime:
                return clock()

        scheduler = Clocked(app=self.app)
        self.made.append(scheduler)
        return scheduler

    def apply(self, *wanted: Schedule) -> None:
        with self.engine.begin() as conn:
            catalog.apply(conn, wanted, self.clock(), prune=False)

    def run_keys(self, schedule: str = "") -> list[str]:
        query = select(runs.c.key).order_by(runs.c.fire_time)
        if schedule:
            query = query.where(runs.c.schedule == schedule)
        with self.engine.connect() as conn:
            return list(conn.execute(query).scalars())

    def statuses(self) -> dict[str, str]:
        with self.engine.connect() as conn:
            return dict(conn.execute(select(runs.c.key, runs.c.status)).all())  # type: ignore[arg-type]

    def finish(self, key: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                update(runs)
                .where(runs.c.key == key)
                .values(status=RunStatus.SUCCEEDED.value, finished_at=self.clock())
            )

    def runs_port(self) -> CeleryRuns:
        return CeleryRuns(self.app)


def make_beats(database_url: str, tmp_path: Path) -> Iterator[Beats]:
    settings = Settings(
        data_dir=tmp_path / "data",
        database_url=database_url,
        broker_url="memory://",
        result_backend="cache+memory://",
        beat_reload_seconds=1.0,
    )
    app = create_app(settings)
    beats = Beats(app, open_engine_for(app), Clock())
    schema.upgrade(beats.engine)
    try:
        yield beats
    finally:
        for made in beats.made:
            made.close()
        beats.engine.dispose()


def open_engine_for(app: Celery) -> Engine:
    from workers.runtime import runtime_of

    return runtime_of(app).engine
