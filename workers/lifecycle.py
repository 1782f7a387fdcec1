"""One run, start to finish: claim the run row, then run the agent inside its hooks.

    claim → [record · time limit · resolve · sandbox · write-back · goal · load ·
             projection · subagents] around the agent → finish

Claiming is the precondition (a second delivery finds the run taken and does
nothing); everything else is a hook in `workers/hooks/`, called in the order of
`default_hooks()`. The sandbox is deleted on every path out: success, an agent's
exception, a soft time limit. A process killed at the hard time limit cannot run
`finally`: the worker's main process ends its run instead
(`killed_at_time_limit`); after any other kill the reaper's sweep removes what
it leaves. Memory candidates leave the run only through `submit` (the
memory-writer queue); this module never writes memory itself.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from memory.engine import autocommit, retrying, safe_url
from workers import runs, sandbox
from workers.hooks import Hook, run_hooks
from workers.hooks.goal import GoalHook
from workers.hooks.load import LoadHook
from workers.hooks.projection import ProjectionHook
from workers.hooks.record import RecordHook
from workers.hooks.resolve import ResolveHook
from workers.hooks.sandbox import SandboxHook
from workers.hooks.state import Clock, RunState, SpawnFn, SubmitFn
from workers.hooks.time_limit import TimeLimitHook, killed
from workers.hooks.write_back import WriteBackHook
from workers.runs import Run, RunStatus
from workers.runtime import Runtime
from workers.subagents import SubagentHook

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Outcome:
    key: str
    status: str  # a RunStatus, "skipped" (another worker has or had it) or "queued" (retry)
    loaded: int = 0
    candidates: int = 0
    summary: str = ""
    error: str = ""
    timings: Mapping[str, float] = field(default_factory=dict)


def default_hooks(time_limit_errors: tuple[type[BaseException], ...] = ()) -> list[Hook]:
    """The lifecycle, in order. `after_run` runs in reverse: write-back before the sandbox
    goes, the record last of all."""
    return [
        RecordHook(),
        TimeLimitHook(time_limit_errors),
        ResolveHook(),
        SandboxHook(),
        WriteBackHook(),
        GoalHook(),
        LoadHook(),
        ProjectionHook(),
        SubagentHook(),
    ]


def execute(
    rt: Runtime,
    key: str,
    *,
    submit: SubmitFn,
    clock: Clock,
    time_limit_errors: tuple[type[BaseException], ...] = (),
    spawn: SpawnFn | None = None,
    hooks: Sequence[Hook] | None = None,
) -> Outcome:
    owner = rt.worker_id
    lease = timedelta(seconds=rt.settings.lease_seconds)
    planned = str(sandbox.plan(rt.settings.sandbox_root, key))
    run = _claim(rt, key, owner, clock, lease, planned)
    if run is None:
        if _unknown(rt, key):
            # A message for another database's run: this worker's settings differ from
            # those of whoever enqueued it. The run waits there for a worker that serves
            # it (or the reaper); say so rather than "already claimed".
            log.error(
                "run %s is not in this worker's database (%s): every process of a"
                " deployment must share NIGHTSHIFT_DATABASE_URL",
                key,
                safe_url(rt.settings.database_url),
            )
            return Outcome(key, "skipped", summary="not in this worker's database")
        return Outcome(key, "skipped", summary="already claimed or finished")
    state = RunState(rt=rt, run=run, owner=owner, clock=clock, submit=submit, spawn=spawn)
    with rt.leases.hold(key, owner, lease, clock):
        run_hooks(state, default_hooks(time_limit_errors) if hooks is None else hooks)
    return Outcome(
        key,
        state.status.value,
        state.loaded_count,
        state.submitted,
        state.result.summary,
        state.error,
        dict(state.timings),
    )


def killed_at_time_limit(
    rt: Runtime, key: str, owner: str, clock: Clock, *, hard_limit: float
) -> bool:
    """End run `key` as `timed_out` after the hard time limit killed `owner`, the worker
    process that held it, and remove its sandbox: what the hooks do when an agent
    stops at the soft limit. Not re-run: an agent that ignored the limit once would
    ignore it again, and each attempt would cost a worker process. Returns False,
    doing nothing, when `owner` no longer holds the run."""
    with autocommit(rt.engine) as conn:
        run = runs.get(conn, key)
        if run is None:
            return False
        error = killed(run.time_limit, hard_limit)
        if not runs.finish(
            conn, key, owner, clock(), status=RunStatus.TIMED_OUT, error=error, tried=error
        ):
            return False
    if run.sandbox:
        try:
            sandbox.remove(Path(run.sandbox))
        except OSError:  # the killed process was still writing: the sweep takes it later
            log.warning(
                "could not remove the sandbox of a run killed at its time limit",
                exc_info=True,
                extra={"action": "run.sandbox_left", "run_key": key},
            )
    return True


@retrying()
def _unknown(rt: Runtime, key: str) -> bool:
    with autocommit(rt.engine) as conn:
        return runs.get(conn, key) is None


@retrying()
def _claim(
    rt: Runtime, key: str, owner: str, clock: Clock, lease: timedelta, box: str
) -> Run | None:
    with autocommit(rt.engine) as conn:
        return runs.claim(conn, key, owner, clock(), lease, sandbox=box)
