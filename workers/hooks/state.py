"""The mutable state of one run while its hooks and its agent work on it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memory.engine import autocommit, retrying
from memory.goals import Attempt, GoalView
from memory.loading import Loaded
from memory.policy import AgentRules
from memory.records import Candidate, Memory, Scope
from workers import attempts
from workers.agents import Agent, AgentResult, RunContext, checked_result
from workers.runs import Run, RunRequest, RunStatus
from workers.runtime import Runtime

Clock = Callable[[], datetime]


SubmitFn = Callable[..., None]
"""``submit(handle, run_key, candidates, votes=[…], followups=[…], tenant=…)``: one
message on the tenant's memory-writer queue; `workers.tasks.write` documents its shape."""
SpawnFn = Callable[[RunRequest], None]


@dataclass
class RunState:
    """Everything the hooks share for one claimed run."""

    rt: Runtime
    run: Run
    owner: str
    clock: Clock
    submit: SubmitFn
    agent: Agent | None = None
    spawn: SpawnFn | None = None
    scope: Scope | None = None
    rules: AgentRules | None = None  # the agent's attachment (NIGHTSHIFT_AGENT_RULES)
    box: Path | None = None
    deadline: float | None = None
    goal: GoalView = field(default_factory=lambda: GoalView(""))
    loaded: Loaded = field(default_factory=lambda: Loaded((), ()))
    goal_memories: tuple[Memory, ...] = ()  # goal records and attempts the load returned
    ctx: RunContext | None = None
    result: AgentResult = field(default_factory=AgentResult)
    status: RunStatus = RunStatus.RUNNING
    error: str = ""
    problems: list[str] = field(default_factory=list)
    submitted: int = 0
    write_handle: str = ""
    followups: list[dict[str, Any]] = field(default_factory=list)
    retry: bool = False  # a transient failure: give the run back to the queue
    timings: dict[str, float] = field(default_factory=dict)
    _attempts: tuple[Attempt, ...] | None = field(default=None, repr=False)

    @property
    def key(self) -> str:
        return self.run.key

    @property
    def loaded_count(self) -> int:
        return len(self.loaded.hot) + len(self.loaded.ranked)

    @property
    def given_ids(self) -> list[str]:
        """What the run record keeps as given: the load, and what the agent searched or
        read on demand (`RunContext.given_ids`)."""
        return self.ctx.given_ids if self.ctx is not None else self.loaded.ids

    def latest_attempts(self) -> tuple[Attempt, ...]:
        """The scope's latest attempts at its goal (`workers.attempts`), read once."""
        if self._attempts is None:
            assert self.scope is not None, "the goal hook sets the scope first"
            self._attempts = _read_attempts(self.rt, self.scope)
        return self._attempts

    def call_agent(self) -> None:
        if self.agent is None or self.ctx is None:
            raise RuntimeError("no agent or context: a hook that sets them is missing")
        self.result = checked_result(self.agent(self.ctx))
        self.problems.extend(self.ctx.refused_votes)  # a refused vote is never silent
        self.problems.extend(self.result.problems)
        self.problems.extend(
            f"candidate {index} not kept: {why}"
            for index, c in enumerate(self._proposed())
            if (why := outside_run(c, self.run))
        )

    def candidates(self) -> Sequence[Candidate]:
        """What the agent proposed in this run's tenant and as this run's agent; the rest
        was named in `problems` when the agent returned."""
        return tuple(c for c in self._proposed() if not outside_run(c, self.run))

    def _proposed(self) -> Sequence[Candidate]:
        made = (*(self.ctx.candidates if self.ctx else ()), *self.result.candidates)
        return tuple(_of_run(c, self.run) for c in made)


def _of_run(candidate: Candidate, run: Run) -> Candidate:
    """The candidate as this run's: its run id is the run's key (which `memory why` and
    a forget by run go by), and one built by hand naming no writer is the run agent's."""
    p = candidate.provenance
    if p.run_id == run.key and p.agent:
        return candidate
    provenance = dataclasses.replace(p, run_id=run.key, agent=p.agent or run.agent)
    return candidate.replace(provenance=provenance)


def outside_run(candidate: Candidate, run: Run) -> str:
    """Why `candidate` is not the run's to propose, or "" when it is. A run writes in
    its own tenant, as its own agent, and into no other agent's layers: the writer
    picks the write rules by the agent a candidate names (`memory.attachment`), so a
    candidate built by hand as another agent's would borrow its rights."""
    scope, agent = candidate.scope, candidate.provenance.agent
    if scope.tenant != run.tenant:
        return f"its scope is in tenant {scope.tenant!r}, not this run's tenant {run.tenant!r}"
    if scope.agent and scope.agent != run.agent:
        return f"its scope is agent {scope.agent!r}'s, not this run's agent {run.agent!r}"
    if agent != run.agent:
        return f"it names agent {agent!r} as its writer; this run is agent {run.agent!r}'s"
    return ""


@retrying()
def _read_attempts(rt: Runtime, scope: Scope) -> tuple[Attempt, ...]:
    with autocommit(rt.engine) as conn:
        return attempts.latest(conn, scope)
