"""Goals and attempts: read the scope's goal before the run.

The attempts are the scope's latest finished runs (`workers.attempts`), read
when the agent or the projection first wants them; this run's own attempt is
recorded when the record hook finishes its row. When the
run's goal text is new, the goal record travels to the writer as a follow-up
batch of the run's write message, under its own handle (`goal:<run key>`), so it
never mixes with the agent's candidates.
"""

from __future__ import annotations

from memory import attachment
from memory.engine import retrying
from memory.goals import GoalView, goal_candidate, goal_record, read_goal_record
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
        run = state.run
        if state.scope is None or state.retry or not run.goal:
            return
        if run.goal == self._current_text(state):
            return
        goal = goal_candidate(
            state.scope,
            run.goal,
            run_key=run.key,
            agent=run.agent,
            schedule=run.schedule,
            parent_run=run.parent_key,  # a subagent's goal is its parent agent's word
        )
        state.followups.append(
            {"handle": receipt_handle("goal", run.key), "candidates": [goal.to_json()]}
        )

    @staticmethod
    def _current_text(state: RunState) -> str:
        if state.goal.text or state.scope is None:
            return state.goal.text
        found = goal_record(state.goal_memories, state.scope)
        return found.content if found else ""


@retrying()
def _read(state: RunState) -> GoalView:
    """A run that brings its goal text needs nothing more (the record, if any, comes with
    the hot memory of the load); one without reads the goal record. The attempts are
    read when first wanted (`RunState.latest_attempts`)."""
    assert state.scope is not None
    if state.run.goal:
        return GoalView("")
    record = read_goal_record(state.rt.store, state.scope)
    return GoalView(record.content, (), record.id) if record else GoalView("")
