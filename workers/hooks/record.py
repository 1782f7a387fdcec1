"""The run record: finish the run row with its status, or give it back to the queue.

First in the hook list, so its `after_run` is the very last thing a run does. A
transient failure (a dropped database connection, an unreachable broker) does
not end the run: the row goes back to `queued` and the task retries it.
"""

from __future__ import annotations

import logging
from typing import Any

from kombu.exceptions import OperationalError as BrokerError

from memory.engine import autocommit, is_transient, retrying
from memory.redaction import redact
from workers import runs
from workers.hooks import Hook
from workers.hooks.state import RunState
from workers.runs import RunStatus

log = logging.getLogger(__name__)


class RecordHook(Hook):
    name = "record"

    def on_error(self, state: RunState, error: BaseException) -> RunStatus | None:
        if is_transient(error) or isinstance(error, BrokerError | ConnectionError):
            state.retry = True
            state.error = redact(f"transient: {type(error).__name__}: {error}")
            log.warning(
                "transient failure; the run goes back to the queue",
                extra={"action": "run.transient", "run_key": state.key},
            )
            return RunStatus.QUEUED
        return None

    def after_run(self, state: RunState) -> None:
        if state.retry or state.status is RunStatus.QUEUED:
            state.status = RunStatus.QUEUED
            _release(state)
            return
        if state.status is not RunStatus.RUNNING and _cancel_requested(state):
            state.status = RunStatus.CANCELLED
            state.error = state.error or "cancelled on request"
        _finish(
            state,
            status=state.status,
            candidates=state.submitted,
            write_handle=state.write_handle,
            summary=redact(state.result.summary),
            error=state.error,
            loaded_ids=state.given_ids,
            # The run's goal attempt; the next run in the scope reads it (workers.attempts).
            tried=redact(state.result.tried or state.result.summary or state.error),
            evidence=redact(state.result.evidence),
        )


@retrying()
def _finish(state: RunState, **outcome: Any) -> None:
    with autocommit(state.rt.engine) as conn:
        if not runs.finish(conn, state.key, state.owner, state.clock(), **outcome):
            log.warning(
                "lost the lease before finishing; another worker owns the run",
                extra={"action": "run.lease_lost", "run_key": state.key},
            )


@retrying()
def _release(state: RunState) -> None:
    with state.rt.engine.begin() as conn:
        runs.release(conn, state.key, state.owner, state.clock())


@retrying()
def _cancel_requested(state: RunState) -> bool:
    if not state.run.parent_key and not state.run.cancel_requested:
        # Only subagents are cancelled by someone else today; skip the query for the rest.
        return False
    with state.rt.engine.connect() as conn:
        return runs.cancel_requested(conn, state.key)
