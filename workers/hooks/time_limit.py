"""The time limit: a deadline for adapters, and a clear status when it fires.

Celery's soft time limit raises inside the worker (`SoftTimeLimitExceeded`); an
adapter that runs a child process enforces the same deadline itself and raises
`AgentTimedOut` after killing it. Both end the run as `timed_out`; the sandbox
hook still removes the sandbox, because `after_run` always runs.
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
            state.error = f"time limit of {state.run.time_limit}s exceeded"
            return RunStatus.TIMED_OUT
        return None
