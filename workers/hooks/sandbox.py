"""The sandbox: a fresh directory per run, checked against its size limit, always removed."""

from __future__ import annotations

from pathlib import Path

from workers import sandbox
from workers.agents import SandboxViolation
from workers.hooks import Hook
from workers.hooks.state import RunState
from workers.runs import RunStatus


class SandboxHook(Hook):
    name = "sandbox"

    def before_agent(self, state: RunState) -> None:
        planned = Path(state.run.sandbox) if state.run.sandbox else None
        state.box = sandbox.make(state.rt.settings.sandbox_root, state.key, planned)

    def after_agent(self, state: RunState) -> None:
        if state.box is None:
            return
        limit = state.rt.settings.sandbox_max_bytes
        used = sandbox.size(state.box, stop_after=limit)
        if used > limit:
            raise SandboxViolation(
                f"the sandbox grew past {limit} bytes (NIGHTSHIFT_SANDBOX_MAX_BYTES)"
            )

    def on_error(self, state: RunState, error: BaseException) -> RunStatus | None:
        if isinstance(error, SandboxViolation):
            state.error = str(error)
            return RunStatus.REJECTED
        return None

    def after_run(self, state: RunState) -> None:
        if state.box is not None:
            sandbox.remove(state.box)
