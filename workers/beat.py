"""The beat scheduler wired to nightshift: `celery -A workers.app beat -S workers.beat:Scheduler`.

Fires become runs through `enqueue`, which creates the run row (unique
`schedule@fire-time`) before sending, so a restarted or second beat cannot start
the same run twice.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import Engine

from schedules.beat import DatabaseScheduler, Fire
from workers.enqueue import enqueue
from workers.runs import RunRequest
from workers.runtime import runtime_of


class Scheduler(DatabaseScheduler):
    def open_engine(self) -> Engine:
        return runtime_of(self.app).engine

    def dispatch(self, fires: list[Fire]) -> None:
        enqueue(self.app, [request_for(f) for f in fires], self.now())


def request_for(fire: Fire) -> RunRequest:
    s = fire.schedule
    return RunRequest(
        key=fire.run_key,
        agent=s.agent,
        tenant=s.tenant,
        user=s.user,
        schedule=s.name,
        goal=s.goal,
        trigger_kind=s.kind,
        trigger_origin="private" if s.user else "api",
        fire_time=fire.fire_time,
        payload=dict(s.payload),
        time_limit=int(s.time_limit / timedelta(seconds=1)),
    )
