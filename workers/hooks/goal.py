"""Goals and attempts: read the scope's goal before the run, append this run's attempt after.

The attempt (what was tried, the outcome, the evidence) and, when the run's goal
text is new, the goal record travel to the writer as follow-up batches of the
run's write message, under their own handles (`attempt:<run key>`), so they never
mix with the agent's candidates.
"""

from __future__ import annotations

from memory import attachment
from memory.engine import retrying
from memory.goals import (
    Attempt,
    GoalView,
    attempt_candidate,
    goal_candidate,
    goal_record,
    read_goal,
)
from memory.records import Scope
from workers.hooks import Hook
from workers.hooks.state import RunState
from workers.hooks.write_back import receipt_handle


class GoalHook(Hook):
    name = "goal"

    def before_agent(self, state: RunState) -> None:
        run = state.run
        state.scope = Scope(run.tenant, run.user, run.agent)
        state.rules = attachment.from_path(state.rt.settings.agent_rules)(run.agent)
        state.goal = _read(state)

    def after_run(self, state: RunState) -> None:
        if state.scope is None or state.retry:
            return
        run = state.run
        candidates = []
        if run.goal and run.goal != self._current_text(state):
            candidates.append(
                goal_candidate(
                    state.scope, run.goal, run_key=run.key, agent=run.agent, schedule=run.schedule
                )
            )
        attempt = Attempt(
            run_key=run.key,
            outcome=state.status.value,
            tried=state.result.tried or state.result.summary or state.error,
            evidence=state.result.evidence,
        )
        candidates.append(
            attempt_candidate(
                state.scope, attempt, agent=run.agent, schedule=run.schedule, subagent=run.subagent
            )
        )
        state.followups.append(
            {
                "handle": receipt_handle("attempt", run.key),
                "candidates": [c.to_json() for c in candidates],
            }
        )

    @staticmethod
    def _current_text(state: RunState) -> str:
        if state.goal.text or state.scope is None:
            return state.goal.text
        found = goal_record(state.goal_memories, state.scope)
        return found.content if found else ""


@retrying()
def _read(state: RunState) -> GoalView:
    """A run that brings its goal text needs only the attempts (the record, if any, comes
    with the hot memory of the load); one without asks for the record too."""
    assert state.scope is not None
    return read_goal(state.rt.store, state.scope, with_record=not state.run.goal)
