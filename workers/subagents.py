"""Async subagents: a run starts child runs (Celery tasks) and may finish before they do.

    def planner(ctx: RunContext) -> AgentResult:
        ok = ctx.spawn("researcher", name="prices", goal="find current prices")
        slow = ctx.spawn("researcher", name="history", goal="dig through 2019")
        slow.cancel()                       # queued: never runs; running: ends cancelled
        return AgentResult(summary="asked two researchers")

A child is an ordinary run row with `parent_key` and `subagent` set, key
`<parent key>/sub:<name>` (so a re-run of the parent cannot start it twice),
enqueued at once. Its result reaches the writer from the child's own run, with
the child's Celery task id as idempotency key and provenance parent run +
subagent, in the parent's scope. Only a succeeded child's candidates can become
facts: the others carry their state and the gate keeps them as episodes at most.
The `goal` a parent passes is that agent's text, not the operator's: the child's
goal record is written with source `inferred` (`memory.goals.goal_candidate`), so
the gate judges it as any agent's writing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection

from memory.engine import retrying
from memory.records import Candidate, Provenance, Scope, Source, content_hash, quote_part
from workers import runs
from workers.agents import RunCancelled, SpawnRequest, Subagent
from workers.enqueue import task_id
from workers.hooks import Hook
from workers.hooks.state import RunState
from workers.runs import RUN_KEY_CHARS, Run, RunRequest, RunStatus, fit

SUBAGENT_STATE = {
    RunStatus.SUCCEEDED: "succeeded",
    RunStatus.PARTIAL: "succeeded",
    RunStatus.CANCELLED: "cancelled",
    RunStatus.QUEUED: "waiting",
    RunStatus.RUNNING: "waiting",
}


def child_key(parent_key: str, name: str) -> str:
    """`<parent key>/sub:<name>`, shortened with its hash when it would not fit a run
    key (a subagent's subagent of a long event's run); the name is a `quote_part`."""
    return fit("", f"{parent_key}/sub:{quote_part(name)}", RUN_KEY_CHARS)


def child_request(
    parent: Run, spawn: SpawnRequest, now: datetime, default_limit: int
) -> RunRequest:
    return RunRequest(
        key=child_key(parent.key, spawn.name),
        agent=spawn.agent,
        tenant=parent.tenant,
        user=parent.user,
        schedule=parent.schedule,
        goal=spawn.goal,
        trigger_kind="subagent",
        trigger_origin=parent.trigger_origin,
        fire_time=now,
        payload=dict(spawn.payload),
        time_limit=spawn.time_limit or default_limit,
        parent_key=parent.key,
        subagent=spawn.name,
    )


def as_subagent_result(
    child: Run, status: RunStatus, found: Iterable[Candidate], parent_agent: str
) -> list[Candidate]:
    """A child's candidates as its parent's subagent result, marked with the child's state.

    They go to the parent's scope (the parent asked for the work), keyed by the
    child's task id, with provenance parent run + subagent.
    """
    state = SUBAGENT_STATE.get(status, "failed")
    child_task = task_id(child.key)
    out = []
    for c in found:
        parent_scope = _parent_scope(c.scope, parent_agent)
        slot = c.key or content_hash(c.content)
        out.append(
            c.replace(
                scope=parent_scope,
                subagent_state=state,
                idempotency_key=f"{child_task}:{slot}",
                provenance=Provenance(
                    source=Source.SUBAGENT,
                    reference=c.provenance.reference or f"run:{child.key}",
                    run_id=child.parent_key,
                    task_id=child_task,
                    agent=parent_agent,
                    subagent=child.subagent,
                    schedule=child.schedule,
                    subject=c.provenance.subject,
                ),
            )
        )
    return out


def _parent_scope(scope: Scope, parent_agent: str) -> Scope:
    # The child wrote to its own agent's layers; move private/agent layers to the parent's agent.
    return Scope(scope.tenant, scope.user, parent_agent if scope.agent else "")


class SubagentHook(Hook):
    """Gives the agent `ctx.spawn(...)` and `ctx.cancelled()`; classifies `RunCancelled`."""

    name = "subagents"

    def before_agent(self, state: RunState) -> None:
        ctx = state.ctx
        assert ctx is not None, "the projection hook builds the context first"
        if state.spawn is not None:
            ctx.spawner = _spawner(state, state.spawn)
        ctx.cancel_check = lambda: _cancel_requested(state)

    def after_agent(self, state: RunState) -> None:
        if state.run.parent_key and _cancel_requested(state):
            raise RunCancelled("the parent run cancelled this subagent")

    def on_error(self, state: RunState, error: BaseException) -> RunStatus | None:
        if isinstance(error, RunCancelled):
            state.error = str(error) or "cancelled"
            return RunStatus.CANCELLED
        return None


def _spawner(
    state: RunState, spawn: Callable[[RunRequest], None]
) -> Callable[[SpawnRequest], Subagent]:
    def start(request: SpawnRequest) -> Subagent:
        child = child_request(state.run, request, state.clock(), state.rt.settings.run_time_limit)
        spawn(child)

        def cancel() -> None:
            _cancel(state, child.key)

        return Subagent(request.name, child.key, cancel)

    return start


@retrying()
def parent_agent(state: RunState) -> str:
    """The agent of the run that spawned this one (its results go to that agent's scope)."""
    with state.rt.engine.connect() as conn:
        parent = runs.get(conn, state.run.parent_key)
    return parent.agent if parent else state.run.agent


@retrying()
def _cancel(state: RunState, key: str) -> None:
    with state.rt.engine.begin() as conn:
        runs.request_cancel(conn, key, state.clock())


@retrying()
def _cancel_requested(state: RunState) -> bool:
    with state.rt.engine.connect() as conn:
        return runs.cancel_requested(conn, state.key)


@dataclass(frozen=True, slots=True)
class TreeNode:
    run: Run
    children: tuple[TreeNode, ...]


def tree(conn: Connection, key: str, *, depth: int = 5) -> TreeNode | None:
    """Run `key` and its subagent runs, `depth` levels down."""
    root = runs.get(conn, key)
    if root is None:
        return None
    return _node(conn, root, depth)


def _node(conn: Connection, run: Run, depth: int) -> TreeNode:
    kids = runs.children(conn, run.key) if depth > 0 else []
    return TreeNode(run, tuple(_node(conn, k, depth - 1) for k in kids))
