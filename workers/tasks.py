"""The Celery tasks: run, write, reap. Thin: the work lives in the modules they call."""

from __future__ import annotations

import gc
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import Task, shared_task
from celery.exceptions import SoftTimeLimitExceeded
from celery.signals import worker_init, worker_ready
from celery.worker import state as worker_state
from celery.worker.request import Request

from memory.engine import retrying
from memory.records import Candidate
from schedules import fires
from workers import runs, write_attempts, writer
from workers.app import RUN_TASK, WRITE_TASK
from workers.enqueue import enqueue, resend, task_id
from workers.lifecycle import execute, killed_at_time_limit
from workers.runs import RunRequest, RunStatus
from workers.runtime import Runtime, runtime_of, worker_id
from workers.sandbox import sweep
from workers.sharding import write_queue

log = logging.getLogger(__name__)

RUN_RETRIES = 5


def utcnow() -> datetime:
    return datetime.now(UTC)


class RunTaskRequest(Request):
    """A run message in the worker's main process. When the hard time limit kills the
    process running it (its agent ignored the soft limit), Celery acknowledges the
    message and the run row would stay `running` until its lease lapsed, to be
    re-sent as a lost worker's and given up as `failed` after
    `NIGHTSHIFT_RUN_MAX_ATTEMPTS` kills: the run ends here as `timed_out` instead,
    and its sandbox goes (`lifecycle.killed_at_time_limit`)."""

    def on_timeout(self, soft: bool, timeout: float) -> None:
        super().on_timeout(soft, timeout)
        if soft or worker_state.should_terminate or not self.worker_pid:
            return  # a cold shutdown: the run is the reaper's, as on any worker loss
        key = self.args[0]
        rt = Runtime(self.task.app.nightshift_settings)  # not this process's pooled one
        try:
            if killed_at_time_limit(
                rt, key, worker_id(self.worker_pid), utcnow, hard_limit=timeout
            ):
                log.error(
                    "run %s: timed_out; its agent ignored the time limit and was killed",
                    key,
                    extra={"action": "run.killed", "run_key": key, "status": "timed_out"},
                )
        except Exception:  # never into Celery's timeout handler; the reaper is the fallback
            log.exception(
                "could not record run %s as timed out", key, extra={"action": "run.killed"}
            )
        finally:
            rt.engine.dispose()


@shared_task(
    bind=True, name=RUN_TASK, acks_late=True, reject_on_worker_lost=True, Request=RunTaskRequest
)
def run(self: Task, key: str) -> dict[str, Any]:
    """Execute run `key`. A second delivery of the same key finds it claimed and does nothing.

    A transient failure (database or broker unreachable) puts the run row back to
    `queued` and retries the task with backoff; past the retries, the reaper
    re-sends it after `NIGHTSHIFT_REQUEUE_AFTER`.
    """
    rt = runtime_of(self.app)

    def submit(
        handle: str, run_key: str, candidates: list[dict[str, Any]], *, tenant: str, **extra: Any
    ) -> None:
        self.app.send_task(
            WRITE_TASK,
            args=[handle, run_key, candidates],
            kwargs=extra,
            task_id=task_id(handle),
            queue=write_queue(tenant, rt.settings.writer_shards),
            argsrepr=f"(handle={handle!r}, candidates={len(candidates)})",
            kwargsrepr=f"(votes={len(extra.get('votes', ()))})",
        )

    def spawn(request: RunRequest) -> None:
        enqueue(self.app, [request], utcnow())

    outcome = execute(
        rt,
        key,
        submit=submit,
        clock=utcnow,
        time_limit_errors=(SoftTimeLimitExceeded,),
        spawn=spawn,
    )
    log.info(
        "run %s: %s",
        key,
        outcome.status,
        extra={"action": "run.done", "run_key": key, "status": outcome.status},
    )
    if outcome.status == RunStatus.QUEUED.value and self.request.retries < RUN_RETRIES:
        raise self.retry(countdown=min(2**self.request.retries, 30), max_retries=RUN_RETRIES)
    return {
        "key": key,
        "status": outcome.status,
        "loaded": outcome.loaded,
        "candidates": outcome.candidates,
        "timings": dict(outcome.timings),
    }


@shared_task(bind=True, name=WRITE_TASK, acks_late=True, reject_on_worker_lost=True)
def write(
    self: Task,
    handle: str,
    run_key: str,
    candidates: list[dict[str, Any]],
    votes: list[dict[str, Any]] | None = None,
    followups: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Apply a run's write message; each batch in one transaction; commit, then ack.

    The message (args, then kwargs):

        handle      "write:<run key>": the receipt handle of the main batch
        run_key     the run that wrote it
        candidates  [Candidate.to_json(), …]: the agent's candidates (may be empty)
        votes       [{"memory_id": …, "direction": "up"|"down", "voter": agent,
                      "run_id": run key}, …] (`memory.reinforcement.Vote`)
        followups   [{"handle": "goal:<run key>", "candidates": […]}, …]: batches
                    the run adds itself (a new goal record), each with its own receipt

    Every candidate is judged as written by a run acting for the person on
    `run_key`'s record (`writer.person_of_run`), whatever it says itself.
    A message that came back unfinished `NIGHTSHIFT_WRITE_MAX_ATTEMPTS` times (its
    writer stopped each time: `workers.write_attempts`) is given up: each batch gets a
    receipt refusing every candidate (rule `writer-crashed`), its votes are dropped.
    Every batch is idempotent by its handle, so a redelivered message changes nothing;
    the votes are applied last, as one batch with handle `votes:<handle>`. A vote
    counts only for a memory its run's record says it was given, and no agent's
    down-vote silences a person's or the operator's word (`memory.vote_rights`); the
    result lists the votes refused, with their reasons (`refused_votes`).
    """
    rt = runtime_of(self.app)
    batches = [(handle, candidates)] if candidates else []
    batches += [(batch["handle"], batch["candidates"]) for batch in followups or ()]
    parsed = [(h, [Candidate.from_json(c) for c in batch]) for h, batch in batches]
    came_back = bool((self.request.delivery_info or {}).get("redelivered"))
    if came_back:
        attempts = write_attempts.came_back(rt.engine, handle, utcnow())
        if attempts >= rt.settings.write_max_attempts:
            receipts = writer.give_up(rt, handle, parsed, attempts, votes=len(votes or ()))
            write_attempts.gave_up(rt.engine, handle, utcnow())
            given = next((r.counts() for r in receipts if r.handle == handle), {})
            return {"handle": handle, "run": run_key, "counts": given, "given_up": attempts}
    counts: dict[str, int] = {}
    person = writer.person_of_run(rt, run_key) if parsed else ""
    for batch_handle, batch in parsed:
        receipt = writer.apply(rt, batch_handle, batch, acting_for=person)
        if batch_handle == handle:
            counts = receipt.counts()
    applied, refused = _apply_votes(rt, handle, votes or [])
    if came_back:
        write_attempts.done(rt.engine, handle)
    return {
        "handle": handle,
        "run": run_key,
        "counts": counts,
        "votes": applied,
        "refused_votes": refused,
    }


def _apply_votes(
    rt: Any, handle: str, votes: list[dict[str, Any]]
) -> tuple[int, list[dict[str, str]]]:
    """The message's votes, one batch (handle `votes:<write handle>`), after its
    candidates: how many memories they changed, and the votes refused."""
    if not votes:
        return 0, []
    try:
        from memory.reinforcement import Vote
        from workers.maintenance import apply_vote_batch
    except ImportError:  # reinforcement not installed in this tree: count and ignore
        log.info(
            "votes received; memory.reinforcement is not available, so ignored",
            extra={"action": "write.votes_ignored", "handle": handle, "votes": len(votes)},
        )
        return 0, []
    report = apply_vote_batch(
        rt.engine, f"votes:{handle}", [Vote.from_json(v) for v in votes], utcnow()
    )
    return report.applied, [r.to_json() for r in report.refused]


@shared_task(bind=True, name="nightshift.reap", acks_late=True)
def reap(self: Task) -> dict[str, int]:
    """Re-enqueue runs whose lease lapsed or that nobody picked up; sweep dead sandboxes;
    delete a batch of runs past their retention."""
    rt = runtime_of(self.app)
    now = utcnow()
    for key in _give_up(rt, now):  # before the re-send: these are not sent again
        log.error(
            "run %s failed: its worker stopped %d times without an outcome; not re-sent",
            key,
            rt.settings.run_max_attempts,
            extra={"action": "run.given_up", "run_key": key},
        )
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
    pruned = _prune(rt, now)
    if pruned:
        log.info(
            "deleted %d run and fire records older than %d days",
            pruned,
            rt.settings.run_retention_days,
            extra={"action": "reap.prune", "pruned": pruned},
        )
    return {"requeued": len(moved), "swept": swept, "pruned": pruned}


@retrying()
def _give_up(rt: Any, now: datetime) -> list[str]:
    with rt.engine.begin() as conn:
        return runs.give_up(conn, now, rt.settings.run_max_attempts)


@retrying()
def _requeue(rt: Any, now: datetime) -> list[str]:
    requeue_after = timedelta(seconds=rt.settings.requeue_after)
    with rt.engine.begin() as conn:
        keys = runs.needing_delivery(conn, now, requeue_after)
        return runs.requeue(conn, keys, now, requeue_after)


@retrying()
def _prune(rt: Any, now: datetime) -> int:
    """Finished runs, and schedule fire records, past `NIGHTSHIFT_RUN_RETENTION_DAYS`: a
    bounded batch of each per pass."""
    if rt.settings.run_retention_days <= 0:
        return 0
    before = now - timedelta(days=rt.settings.run_retention_days)
    with rt.engine.begin() as conn:
        return runs.prune(conn, before) + fires.prune(conn, before)


def _sweep(rt: Any, now: datetime) -> int:
    with rt.engine.connect() as conn:
        alive = runs.running_sandboxes(conn, now)
    return len(sweep(rt.settings.sandbox_root, alive, min_age=rt.settings.sandbox_sweep_age))


@worker_ready.connect
def _sweep_on_start(sender: Any, **_: Any) -> None:
    app = getattr(sender, "app", None)
    if app is not None and hasattr(app, "nightshift_settings"):
        _sweep(runtime_of(app), utcnow())


@worker_init.connect
def _freeze_what_startup_made(**_: Any) -> None:
    """What the worker has imported by now lives as long as it does: take it out of
    the cyclic collector's reach (`gc.freeze`). Without this, about one writer apply
    in a hundred paid for a full collection over the ~115,000 objects the imports
    leave, about 30 ms, and a prefork child copies the pages the collector touches
    instead of sharing them with its parent."""
    gc.collect()
    gc.freeze()
