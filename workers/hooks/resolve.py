"""Find the run's agent (python callable, command or LLM adapter) before anything is made."""

from __future__ import annotations

from workers.agents import UnknownAgentError, resolve
from workers.hooks import Hook
from workers.hooks.state import RunState
from workers.runs import RunStatus


class ResolveHook(Hook):
    name = "resolve"

    def before_agent(self, state: RunState) -> None:
        state.agent = resolve(state.run.agent, state.rt.settings.agents, state.rt.settings)

    def on_error(self, state: RunState, error: BaseException) -> RunStatus | None:
        if isinstance(error, UnknownAgentError):
            state.error = str(error)
            return RunStatus.FAILED
        return None
