"""Projection: the agent's `RunContext`, and for agents that read files (a command agent)
the loaded memory, goal, attempts and trigger as files in the sandbox."""

from __future__ import annotations

from memory.access import readable_scopes
from memory.records import Memory
from workers.agents import RunContext, Trigger, reads_files
from workers.hooks import Hook
from workers.hooks.state import RunState
from workers.projection import project


class ProjectionHook(Hook):
    name = "projection"

    def before_agent(self, state: RunState) -> None:
        run, box, scope = state.run, state.box, state.scope
        assert box is not None and scope is not None, "the sandbox and goal hooks come first"
        trigger = Trigger(
            kind=run.trigger_kind,
            origin=run.trigger_origin,
            fire_time=run.fire_time,
            payload=run.payload,
        )
        goal = run.goal or state.goal.text
        if state.agent is not None and reads_files(state.agent):
            attempts = state.latest_attempts()
            project(box, state.loaded, goal=goal, trigger=trigger, attempts=attempts)
        store, rules, origin = state.rt.store, state.rules, run.trigger_origin
        readable = set(readable_scopes(scope, rules, origin=origin))

        def search(query: str, limit: int) -> list[Memory]:
            found = store.search(scope, query, limit=limit, rules=rules, origin=origin)
            return [m for m, _score in found]

        def read(memory_id: str) -> Memory | None:
            found = next(iter(store.get(scope, [memory_id])), None)
            return found if found is not None and found.scope in readable else None

        state.ctx = RunContext(
            run_key=run.key,
            agent=run.agent,
            scope=scope,
            goal=goal,
            trigger=trigger,
            memories=(*state.loaded.hot, *state.loaded.ranked),
            sandbox=box,
            schedule=run.schedule,
            attempts_source=state.latest_attempts,
            deadline=state.deadline,
            parent_key=run.parent_key,
            subagent=run.subagent,
            searcher=search,
            reader=read,
        )
