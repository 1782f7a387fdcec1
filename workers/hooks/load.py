"""Memory load: bounded, ranked against the goal and the trigger.

The record hook keeps on the run row exactly which memories the agent was given
(with the outcome, in the same UPDATE), so "what did it know when it acted" has
an answer. Goal records and attempts are given as the goal view
(`RunContext.attempts`), not as ranked memory.
"""

from __future__ import annotations

from memory.engine import retrying
from memory.goals import is_goal_memory, split_goal_memories
from memory.loading import Loaded
from memory.store import LoadBounds
from workers.hooks import Hook
from workers.hooks.state import RunState
from workers.runs import Run


class LoadHook(Hook):
    name = "load"

    def before_agent(self, state: RunState) -> None:
        found = _load(state)
        state.loaded = Loaded(split_goal_memories(found.hot), split_goal_memories(found.ranked))
        state.goal_memories = tuple(m for m in (*found.hot, *found.ranked) if is_goal_memory(m))


@retrying()
def _load(state: RunState) -> Loaded:
    assert state.scope is not None
    settings, run = state.rt.settings, state.run
    bounds = LoadBounds(limit=settings.load_limit, max_chars=settings.load_max_chars)
    found: Loaded = state.rt.store.load(
        state.scope,
        goal=run.goal or state.goal.text,
        trigger=trigger_text(run),
        bounds=bounds,
        rules=state.rules,
        origin=run.trigger_origin,
    )
    return found


def trigger_text(run: Run) -> str:
    """Words of the payload for ranking only; bounded so a huge payload costs nothing."""
    words = [str(v) for v in run.payload.values() if isinstance(v, str | int | float)]
    return " ".join(words)[:2000]
