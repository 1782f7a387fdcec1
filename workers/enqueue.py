"""Putting runs on the `runs` queue: create the run row first, then send.

The row's unique key is the guard: beat, events and the CLI all come through
here, and only the caller whose INSERT created the row sends the message. The
Celery task id is derived from the run key, so Flower shows one task per run.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from celery import Celery
from kombu.exceptions import OperationalError as BrokerError

from memory.engine import retrying
from memory.records import quote_part
from workers import runs
from workers.app import RUN_TASK, RUNS_QUEUE
from workers.runs import RunRequest
from workers.runtime import runtime_of

_TASK_IDS = uuid.UUID("6f1d2c1e-4b7a-5e39-9a1f-0c8e2f5b7d41")


def task_id(name: str) -> str:
    """A Celery task id derived from a run key or write handle: stable, and safe as a
    file name (run keys contain '/' and ':', which the file result backend cannot store)."""
    return str(uuid.uuid5(_TASK_IDS, name))


class RunsNotSentError(BrokerError):
    """The broker did not take the messages of runs that are recorded: their rows stay
    `queued` and the reaper sends them once the broker answers. `keys` names them, so
    a caller can say which runs will still happen (a manual run's key holds a fresh
    id: nobody could find it otherwise). The broker's error is the `__cause__`."""

    def __init__(self, keys: Sequence[str], error: BrokerError) -> None:
        super().__init__(str(error))
        self.keys = list(keys)


def enqueue(app: Celery, requests: Sequence[RunRequest], now: datetime) -> list[str]:
    """Create and send the runs that do not exist yet; return their keys.

    Raises `RunsNotSentError` naming the created runs not sent when the broker
    cannot be reached."""
    created = _create(app, requests, now)
    by_key = {r.key: r for r in requests}
    for position, key in enumerate(created):
        try:
            send(app, by_key[key])
        except BrokerError as error:
            raise RunsNotSentError(created[position:], error) from error
    return created


def send(app: Celery, request: RunRequest) -> None:
    app.send_task(
        RUN_TASK,
        args=[request.key],
        task_id=task_id(request.key),
        queue=RUNS_QUEUE,
        soft_time_limit=request.time_limit,
        time_limit=request.time_limit + 30,
        argsrepr=_describe(
            request.key, request.agent, request.tenant, request.user, request.trigger_kind
        ),
    )


def resend(app: Celery, run: runs.Run) -> None:
    app.send_task(
        RUN_TASK,
        args=[run.key],
        task_id=task_id(run.key),
        queue=RUNS_QUEUE,
        soft_time_limit=run.time_limit,
        time_limit=run.time_limit + 30,
        argsrepr=_describe(run.key, run.agent, run.tenant, run.user, run.trigger_kind),
    )


def _describe(key: str, agent: str, tenant: str, user: str, trigger: str) -> str:
    # What Flower shows as the task's arguments: who and why, never content.
    scope = f"{quote_part(tenant)}/{quote_part(user) if user else '*'}"
    return f"(run={key!r}, agent={agent!r}, scope={scope!r}, trigger={trigger!r})"


@retrying()
def _create(app: Celery, requests: Sequence[RunRequest], now: datetime) -> list[str]:
    with runtime_of(app).engine.begin() as conn:
        return runs.create(conn, requests, now)
