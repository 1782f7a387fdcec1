"""The Celery tasks: run, write, reap. Thin: the work lives in the modules they call."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_ready

from memory.engine import retrying
from memory.records import Candidate
from workers import runs, writer
from workers.app import RUN_TASK, WRITE_QUEUE, WRITE_TASK
from workers.enqueue import resend, task_id
from workers.lifecycle import execute
from workers.runtime import runtime_of
from workers.sandbox import sweep

log = logging.getLogger(__name__)


def utcnow() -> datetime:
    return datetime.now(UTC)


@shared_task(bind=True, name=RUN_TASK, acks_late=True, reject_on_worker_lost=True)
def run(self: Task, key: str) -> dict[str, Any]:
    """Execute run `key`. A second delivery of the same key finds it claimed and does nothing."""
    rt = runtime_of(self.app)

    def submit(handle: str, run_key: str, candidates: list[dict[str, Any]]) -> None:
        self.app.send_task(
            WRITE_TASK,
            args=[handle, run_key, candidates],
            task_id=task_id(handle),
            queue=WRITE_QUEUE,
            argsrepr=f"(handle={handle!r}, candidates={len(candidates)})",
        )

    outcome = execute(
        rt, key, submit=submit, clock=utcnow, time_limit_errors=(SoftTimeLimitExceeded,)
    )
    log.info(
        "run %s: %s",
        key,
        outcome.status,
        extra={"action": "run.done", "run_key": key, "status": outcome.status},
    )
    return {
        "key": key,
        "status": outcome.status,
        "loaded": outcome.loaded,
        "candidates": outcome.candidates,
    }


@shared_task(bind=True, name=WRITE_TASK, acks_late=True, reject_on_worker_lost=True)
def write(self: Task, handle: str, run_key: str, candidates: list[dict[str, Any]]) -> dict:
    """Apply a run's candidates through the gate, in one transaction; commit, then ack."""
    rt = runtime_of(self.app)
    receipt = writer.apply(rt, handle, [Candidate.from_json(c) for c in candidates])
    return {"handle": handle, "run": run_key, "counts": receipt.counts()}


@shared_task(bind=True, name="nightshift.reap", acks_late=True)
def reap(self: Task) -> dict[str, int]:
    """Re-enqueue runs whose lease lapsed or that nobody picked up; sweep dead sandboxes."""
    rt = runtime_of(self.app)
    now = utcnow()
    moved = _requeue(rt, now)
    for key in moved:
        with rt.engine.connect() as conn:
            found = runs.get(conn, key)
        if found is not None:
            resend(self.app, found)
    swept = _sweep(rt, now)
    if moved or swept:
        log.warning(
            "reaper re-enqueued %d runs, removed %d sandboxes",
            len(moved),
            swept,
            extra={"action": "reap", "requeued": len(moved), "swept": swept},
        )
    return {"requeued": len(moved), "swept": swept}


@retrying()
def _requeue(rt: Any, now: datetime) -> list[str]:
    requeue_after = timedelta(seconds=rt.settings.requeue_after)
    with rt.engine.begin() as conn:
        keys = runs.needing_delivery(conn, now, requeue_after)
        return runs.requeue(conn, keys, now, requeue_after)


def _sweep(rt: Any, now: datetime) -> int:
    with rt.engine.connect() as conn:
        alive = runs.running_sandboxes(conn, now)
    return len(sweep(rt.settings.sandbox_root, alive))


@worker_ready.connect
def _sweep_on_start(sender: Any, **_: Any) -> None:
    app = getattr(sender, "app", None)
    if app is not None and hasattr(app, "nightshift_settings"):
        _sweep(runtime_of(app), utcnow())
