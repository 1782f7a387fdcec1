"""The time limit: a deadline for adapters, and a clear status when it fires.

Celery's soft time limit raises inside the worker (`SoftTimeLimitExceeded`); an
adapter that runs a child process enforces the same deadline itself and raises
`AgentTimedOut` after killing it. Both end the run as `timed_out`; the sandbox
hook still removes the sandbox, because `after_run` always runs. An agent that
ignores the soft limit is killed with its worker process at the hard limit;
the worker's main process then ends the run the same way
(`workers.lifecycle.killed_at_time_limit`), saying so (`killed`).
"""

from __future__ import annotations

import time

from workers.agents import AgentTimedOut
from workers.hooks import Hook
from workers.hooks.state import RunState
from workers.runs import RunStatus


class TimeLimitHook(Hook):
    name = "time_limit"

    def __init__(self, errors: tuple[type[BaseException], ...] = ()) -> None:
        self._errors: tuple[type[BaseException], ...] = (AgentTimedOut, *errors)

    def before_agent(self, state: RunState) -> None:
        state.deadline = time.monotonic() + state.run.time_limit

    def on_error(self, state: RunState, error: BaseException) -> RunStatus | None:
        if isinstance(error, self._errors):
            state.error = exceeded(state.run.time_limit)
            return RunStatus.TIMED_OUT
        return None


def exceeded(time_limit: int) -> str:
    """A timed-out run's error: the time limit it had."""
    return f"time limit of {time_limit}s exceeded"


def killed(time_limit: int, hard_limit: float) -> str:
    """The error of a run whose agent ignored the time limit and was killed with its
    worker process at the hard limit."""
    return (
        f"{exceeded(time_limit)}; the agent did not stop, so its worker process was"
        f" killed at the hard limit of {hard_limit:g}s"
    )
