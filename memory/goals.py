"""Goals and attempts: what an agent is after in one scope, and what it already tried.

Built only on the public `Store` API and ordinary memories, so the writer's gate,
idempotency and supersession apply to them like to any other memory:

- the goal record is a ``goal`` memory keyed ``goal`` in the run's scope (a new
  goal text supersedes the old one, history kept);
- each run appends an attempt: an ``episode`` keyed ``attempt.<run key>`` whose
  content says what was tried, the outcome and the evidence, so a retried run
  replaces its own attempt instead of adding a second one.

    view = read_goal(store, Scope("acme", "ana", "triage"))
    view.text, [a.outcome for a in view.attempts]

A run is given its goal and its recent attempts apart from the ranked memory
(`split_goal_memories`), and its goal text is what `Store.load` ranks against.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from memory.records import Candidate, Kind, Memory, Provenance, Scope, Source
from memory.store import Store

GOAL_KEY = "goal"
ATTEMPT_PREFIX = "attempt."
MAX_FIELD_CHARS = 600
_ATTEMPT = re.compile(
    r"^attempt (?P<run>\S+): (?P<outcome>[a-z_]+)\. tried: (?P<tried>.*?)"
    r"(?:\. evidence: (?P<evidence>.*))?$",
    re.S,
)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One run's try at a goal."""

    run_key: str
    outcome: str  # the run's status: succeeded, failed, timed_out, …
    tried: str = ""
    evidence: str = ""
    at: datetime | None = None
    memory_id: str = ""

    def content(self) -> str:
        text = f"attempt {self.run_key}: {self.outcome}. tried: {_clip(self.tried) or '(nothing said)'}"
        return text + (f". evidence: {_clip(self.evidence)}" if self.evidence else "")

    @classmethod
    def from_memory(cls, memory: Memory) -> Attempt:
        found = _ATTEMPT.match(memory.content)
        if found is None:
            run_key = memory.key.removeprefix(ATTEMPT_PREFIX)
            return cls(
                run_key, "unknown", memory.content, at=memory.created_at, memory_id=memory.id
            )
        return cls(
            run_key=found["run"],
            outcome=found["outcome"],
            tried=found["tried"],
            evidence=found["evidence"] or "",
            at=memory.created_at,
            memory_id=memory.id,
        )


@dataclass(frozen=True, slots=True)
class GoalView:
    """A scope's goal text and its recent attempts, newest first."""

    text: str
    attempts: tuple[Attempt, ...] = ()
    memory_id: str = ""


def is_goal_memory(memory: Memory) -> bool:
    return memory.key == GOAL_KEY or memory.key.startswith(ATTEMPT_PREFIX)


def split_goal_memories(memories: Iterable[Memory]) -> tuple[Memory, ...]:
    """`memories` without goal records and attempts (a run gets those as its goal view)."""
    return tuple(m for m in memories if not is_goal_memory(m))


def read_goal(
    store: Store, scope: Scope, *, attempts: int = 5, scan: int = 25, with_record: bool = True
) -> GoalView:
    """The active goal of `scope` and up to `attempts` latest attempts (of the newest `scan`).

    `with_record=False` skips the goal record's query (its text is then empty), for a
    caller that already knows the goal text and finds the record in its loaded memory.
    """
    record = None
    if with_record:
        record = next(
            (m for m in reversed(store.history(scope, GOAL_KEY)) if m.scope == scope), None
        )
    found = [
        Attempt.from_memory(m)
        for m in store.show(scope, limit=scan)
        if m.scope == scope and m.key.startswith(ATTEMPT_PREFIX)
    ][:attempts]
    return GoalView(record.content if record else "", tuple(found), record.id if record else "")


def goal_record(memories: Iterable[Memory], scope: Scope) -> Memory | None:
    """The goal record of `scope` among `memories` (e.g. a load's hot memory), if there."""
    return next((m for m in memories if m.key == GOAL_KEY and m.scope == scope), None)


def goal_candidate(
    scope: Scope, text: str, *, run_key: str, agent: str, schedule: str = ""
) -> Candidate:
    """The goal record for `scope`. Its text comes from the schedule or the trigger, both
    the operator's word, so its source is `operator`."""
    return Candidate(
        scope=scope,
        kind=Kind.GOAL,
        content=_clip(text),
        key=GOAL_KEY,
        idempotency_key=f"{run_key}:{GOAL_KEY}",
        provenance=Provenance(
            source=Source.OPERATOR,
            reference=f"schedule:{schedule}" if schedule else f"run:{run_key}",
            run_id=run_key,
            task_id=run_key,
            agent=agent,
            schedule=schedule,
            subject=scope.user,
        ),
    )


def attempt_candidate(
    scope: Scope, attempt: Attempt, *, agent: str, schedule: str = "", subagent: str = ""
) -> Candidate:
    """An attempt as an episode; the same run key always names the same attempt."""
    return Candidate(
        scope=scope,
        kind=Kind.EPISODE,
        content=attempt.content(),
        key=attempt_key(attempt.run_key),
        idempotency_key=f"{attempt.run_key}:{ATTEMPT_PREFIX.rstrip('.')}",
        evidence=_clip(attempt.evidence),
        meta={"attempt": True, "outcome_status": attempt.outcome},
        provenance=Provenance(
            source=Source.INFERRED,
            reference=f"run:{attempt.run_key}",
            # run_id stays empty: "what did run X remember" means the agent's own output;
            # an attempt is found by its key, `attempt.<run key>`, and by task_id.
            task_id=attempt.run_key,
            agent=agent,
            subagent=subagent,
            schedule=schedule,
            subject=scope.user,
        ),
    )


def attempt_key(run_key: str) -> str:
    """`attempt.<run key>`, shortened with a hash when a long run key would not fit a key."""
    key = f"{ATTEMPT_PREFIX}{run_key}"
    if len(key) <= 256:
        return key
    return f"{ATTEMPT_PREFIX}{run_key[:200]}~{hashlib.sha256(run_key.encode()).hexdigest()[:16]}"


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_FIELD_CHARS else text[: MAX_FIELD_CHARS - 1] + "…"
