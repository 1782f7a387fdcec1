"""The run lifecycle as small hooks, dramatiq-middleware style.

A hook is one cross-cutting concern around the agent call. `run_hooks` calls,
for the hooks in order:

    before_agent(state)        in order; a hook that raises ends the run (the
                               hooks entered so far still get `after_run`)
    agent(ctx)
    after_agent(state)         in order, only when the agent returned
    on_error(state, error)     in order when anything above raised; the first
                               hook returning a status classifies the error
    after_run(state)           in REVERSE order, always (cleanup, write-back, record)

Adding tracing or a budget is one new hook in `default_hooks()`. Each call is
timed into `state.timings[hook.name]`, which the benchmark reports.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from memory.redaction import redact
from workers.hooks.state import RunState
from workers.runs import RunStatus

log = logging.getLogger(__name__)


class Hook:
    """A no-op hook; subclasses override the phases they care about."""

    name = "hook"

    def before_agent(self, state: RunState) -> None:
        return None

    def after_agent(self, state: RunState) -> None:
        return None

    def on_error(self, state: RunState, error: BaseException) -> RunStatus | None:
        return None

    def after_run(self, state: RunState) -> None:
        return None


def run_hooks(state: RunState, hooks: Sequence[Hook]) -> None:
    """Run the agent of `state` inside `hooks`; the outcome is left on `state`."""
    entered: list[Hook] = []
    try:
        for hook in hooks:
            entered.append(hook)
            _timed(state, hook.name, hook.before_agent)
        started = time.perf_counter()
        try:
            state.call_agent()
        finally:
            state.timings["agent"] = time.perf_counter() - started
        for hook in hooks:
            _timed(state, hook.name, hook.after_agent)
        if state.status is RunStatus.RUNNING:
            state.status = RunStatus.PARTIAL if state.problems else RunStatus.SUCCEEDED
            state.error = redact("; ".join(state.problems))[:4000]
    except BaseException as error:  # SoftTimeLimitExceeded is a BaseException subclass path too
        state.status = _classify(state, hooks, error)
        if state.status is RunStatus.FAILED and not isinstance(error, Exception):
            raise  # KeyboardInterrupt, SystemExit: let the process stop
    finally:
        for hook in reversed(entered):
            try:
                _timed(state, hook.name, hook.after_run)
            except Exception as error:
                # A transient failure here (the broker gone while submitting) gives the
                # run back to the queue; anything else fails it.
                state.status = _classify(state, hooks, error)


def _classify(state: RunState, hooks: Sequence[Hook], error: BaseException) -> RunStatus:
    for hook in hooks:
        status = hook.on_error(state, error)
        if status is not None:
            return status
    state.error = redact(f"{type(error).__name__}: {error}")
    log.error(
        "run failed",
        exc_info=error,
        extra={"action": "run.failed", "run_key": state.key},
    )
    return RunStatus.FAILED


def _timed(state: RunState, name: str, call: object) -> None:
    started = time.perf_counter()
    try:
        call(state)  # type: ignore[operator]
    finally:
        state.timings[name] = state.timings.get(name, 0.0) + time.perf_counter() - started
