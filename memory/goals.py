"""Goals and attempts: what an agent is after in one scope, and what it already tried.

- The goal record is a ``goal`` memory keyed ``goal`` in the run's scope, written
  through the writer's gate like any memory (a new goal text supersedes the old
  one, history kept). Its text is what `Store.load` ranks against, and what a run
  without a goal of its own is given as its goal.
- Goal state is written only by those who speak for the scope's work
  (`GOAL_SOURCES`): the person, the operator, and the agent itself. Text that
  arrived from outside — an event, a feed, a tool's output, another agent's report
  — that reads as a plan is someone else's plan; the gate keeps it as an episode
  and never lets it near the ``goal`` key (`memory.policy`).
- An attempt (what one run tried, its outcome, its evidence) is a fact about a
  run, so it lives on the run's own row (`workers.attempts` reads a scope's
  latest); this module only defines its shape.

    record = read_goal_record(store, Scope("acme", "ana", "triage"))

A run is given its goal and its recent attempts apart from the ranked memory
(`split_goal_memories`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from memory.folding import folded_key
from memory.records import Candidate, Kind, Memory, Provenance, Scope, Source, Status

if TYPE_CHECKING:
    from memory.store import Store

GOAL_KEY = "goal"
MAX_FIELD_CHARS = 600

GOAL_SOURCES = frozenset({Source.STATED, Source.OPERATOR, Source.INFERRED})
"""The sources that may write goal state: the person and the operator (their word),
and the agent itself (`inferred`: its own plans, and the goal a parent run gives its
subagent). Not `observed`: a plan seen in an event, a feed or a tool's output is the
plan of whoever wrote it. Not `subagent`: a subagent's report is relabelled
`subagent` whatever it came from, so trusting it would let an observed plan in
through a child run."""


@dataclass(frozen=True, slots=True)
class Attempt:
    """One run's try at a goal."""

    run_key: str
    outcome: str  # the run's status: succeeded, failed, timed_out, …
    tried: str = ""
    evidence: str = ""
    at: datetime | None = None


@dataclass(frozen=True, slots=True)
class GoalView:
    """A scope's goal text and its recent attempts, newest first."""

    text: str
    attempts: tuple[Attempt, ...] = ()
    memory_id: str = ""


def is_goal_key(key: str) -> bool:
    """Whether `key` is the goal record's slot, however it is spelled ("Goal ")."""
    return folded_key(key) == GOAL_KEY


def is_goal_memory(memory: Memory) -> bool:
    return is_goal_key(memory.key)


def split_goal_memories(memories: Iterable[Memory]) -> tuple[Memory, ...]:
    """`memories` without goal records (a run gets its goal apart from ranked memory)."""
    return tuple(m for m in memories if not is_goal_memory(m))


def read_goal_record(store: Store, scope: Scope) -> Memory | None:
    """The goal record of `scope` itself (not of a layer above): the newest one
    `goal_record` accepts, if any."""
    return goal_record(reversed(store.history(scope, GOAL_KEY)), scope)


def goal_record(memories: Iterable[Memory], scope: Scope) -> Memory | None:
    """The goal record of `scope` among `memories` (e.g. a load's hot memory), if there.

    Only an accepted goal from `GOAL_SOURCES` is one: a row on the key from anywhere
    else (the gate refuses those; an older store may hold one) is never a run's goal,
    and neither is one still waiting for review (an agent's goal over the operator's).
    """
    return next(
        (
            m
            for m in memories
            if is_goal_key(m.key)
            and m.scope == scope
            and m.kind is Kind.GOAL
            and m.source in GOAL_SOURCES
            and m.status not in _NOT_ACCEPTED
        ),
        None,
    )


_NOT_ACCEPTED = frozenset({Status.PENDING_REVIEW, Status.REJECTED})


def goal_candidate(
    scope: Scope,
    text: str,
    *,
    run_key: str,
    agent: str,
    schedule: str = "",
    parent_run: str = "",
) -> Candidate:
    """The goal record for `scope`, from the goal a run was started with.

    Whose word the text is decides its source. A schedule's goal and a trigger's
    (`nightshift trigger --goal`) are the operator's: `operator`. The goal a parent
    run gave its subagent (`parent_run`, from `ctx.spawn(goal=…)`) is that agent's
    text: `inferred`, so the gate judges it as any agent's writing — an injection
    is refused, and it does not replace an operator's goal without review.
    """
    source = Source.INFERRED if parent_run else Source.OPERATOR
    if parent_run:
        reference = f"run:{parent_run}"
    else:
        reference = f"schedule:{schedule}" if schedule else f"run:{run_key}"
    return Candidate(
        scope=scope,
        kind=Kind.GOAL,
        content=clip(text),
        key=GOAL_KEY,
        idempotency_key=f"{run_key}:{GOAL_KEY}",
        provenance=Provenance(
            source=source,
            reference=reference,
            run_id=run_key,
            task_id=run_key,
            agent=agent,
            schedule=schedule,
            subject=scope.user,
        ),
    )


def clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_FIELD_CHARS else text[: MAX_FIELD_CHARS - 1] + "…"
