"""The agent interface: a callable that takes a `RunContext`, and the registry of agents.

    def my_agent(ctx: RunContext) -> AgentResult:
        seen = {m.key for m in ctx.memories}
        for item in fetch_new_items(skip=seen):
            ctx.remember(f"saw {item.title}", key=f"item.{item.id}", source="observed")
        return AgentResult(summary="checked the feed")

Agents are named; a deployment maps names to adapters with
`NIGHTSHIFT_AGENTS="name=target;…"` where a target is one of

    package.module:callable          python: the callable is given a RunContext
    python:package.module:callable   the same, spelled out
    command:/path/to/program args    any executable, run in the sandbox (workers/adapters/command.py)
    llm:model-name                   a tool-calling loop against an OpenAI-compatible endpoint

Every adapter is itself an `Agent` (a callable taking a RunContext), so the run
lifecycle never needs to know which kind it is calling.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory.records import Candidate, Kind, Layer, Memory, Provenance, Scope, Source
from memory.vote_rights import Fate
from memory.vote_rights import judge as judge_vote

if TYPE_CHECKING:
    from memory.goals import Attempt
    from workers.settings import Settings

BUILTIN_AGENTS: Mapping[str, str] = {
    "feed-watcher": "workers.demo.agent:feed_watcher",
}
ADAPTERS = ("python", "command", "llm")


class UnknownAgentError(LookupError):
    """The agent named by a schedule, trigger or CLI call is not configured."""

    def __init__(self, name: str, known: Sequence[str], why: str = "") -> None:
        super().__init__(
            f"unknown agent {name!r}{f' ({why})' if why else ''}; configured agents: "
            f"{', '.join(sorted(known)) or 'none'} "
            "(add one with NIGHTSHIFT_AGENTS='name=package.module:callable')"
        )
        self.name = name


class RunCancelled(Exception):  # noqa: N818 - it reads as what happened to the run
    """Raised by an agent (or `RunContext.check_cancelled`) to end its run as `cancelled`."""


class AgentTimedOut(Exception):  # noqa: N818
    """An adapter's own time limit fired (its child process was killed)."""


class SandboxViolation(Exception):
    """The agent broke a sandbox rule (wrote outside it, grew past its size limit)."""


class VoteRefused(ValueError):
    """A vote that cannot count (`memory.vote_rights`): on a memory this run was not
    given, or a down-vote on the person's or the operator's word. The message says
    which and why; nothing was recorded."""


@dataclass(frozen=True, slots=True)
class Trigger:
    """Why the run started. `payload` came from outside: treat it as data, never as orders."""

    kind: str  # cron | heartbeat | event | manual
    origin: str  # private | shared | api
    fire_time: datetime | None
    payload: Mapping[str, Any]
    payload_is_untrusted: bool = True


@dataclass(frozen=True, slots=True)
class AgentResult:
    """What an agent hands back. `tried` and `evidence` become the run's goal attempt."""

    summary: str = ""
    candidates: Sequence[Candidate] = ()
    tried: str = ""
    evidence: str = ""
    problems: Sequence[str] = ()  # parts of its output that were refused (run becomes partial)


class AgentResultError(TypeError):
    """An agent handed back something other than an `AgentResult` (or None), or one
    whose fields are not what `AgentResult` declares. A bug in the agent: its run
    fails at once with this message; running it again would not help."""


_RESULT_TEXTS = ("summary", "tried", "evidence")


def checked_result(returned: object) -> AgentResult:
    """What an agent returned, as its `AgentResult`: None is the empty result; anything
    else that is not an `AgentResult` with text where it holds text, candidates in
    `candidates` and text in `problems` raises `AgentResultError` naming what it got."""
    if returned is None:
        return AgentResult()
    if not isinstance(returned, AgentResult):
        raise AgentResultError(
            f"the agent returned {_a(returned)} where an AgentResult (or None) was expected"
        )
    for name in _RESULT_TEXTS:
        if not isinstance(getattr(returned, name), str):
            raise AgentResultError(
                f"the agent's AgentResult.{name} is {_a(getattr(returned, name))}, not text"
            )
    for index, candidate in enumerate(returned.candidates):
        if not isinstance(candidate, Candidate):
            raise AgentResultError(
                f"the agent's AgentResult.candidates[{index}] is {_a(candidate)},"
                " not a Candidate (build one with ctx.remember)"
            )
    for index, problem in enumerate(returned.problems):
        if not isinstance(problem, str):
            raise AgentResultError(
                f"the agent's AgentResult.problems[{index}] is {_a(problem)}, not text"
            )
    return returned


def _a(value: object) -> str:
    """`value`'s type as a phrase: "a dict", "an int", "None"."""
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


@dataclass(frozen=True, slots=True)
class Vote:
    """A run's judgement of a memory it was given: `up` (checked, still true) or `down`.

    The memory writer counts it only through the run's record of what it was given
    (`memory.vote_rights`); `RunContext.vote` checks the same rule first."""

    memory_id: str
    direction: str  # up | down

    def __post_init__(self) -> None:
        if self.direction not in ("up", "down"):
            raise ValueError(f"a vote is 'up' or 'down', not {self.direction!r}")


@dataclass(frozen=True, slots=True)
class SpawnRequest:
    """A subagent run to start: `name` is unique within its parent run."""

    name: str
    agent: str
    goal: str = ""
    payload: Mapping[str, Any] = field(default_factory=dict)
    time_limit: int | None = None


@dataclass(frozen=True, slots=True)
class Subagent:
    """A started subagent. `cancel()` stops it (queued: never runs; running: ends cancelled)."""

    name: str
    run_key: str
    cancel: Callable[[], None]


Searcher = Callable[[str, int], Sequence[Memory]]
Reader = Callable[[str], Memory | None]
Spawner = Callable[[SpawnRequest], Subagent]


@dataclass
class RunContext:
    """What an agent gets: who it runs for, why, what it remembers, and where it may write.

    Loaded memory and the trigger payload are data recorded or sent by others: they
    inform the agent, they never instruct it. What the run was given — `memories`,
    and whatever `search` and `read` return — is kept (`given_ids`): the run record
    stores it, and a vote counts only on it.
    """

    run_key: str
    agent: str
    scope: Scope
    goal: str
    trigger: Trigger
    memories: tuple[Memory, ...]
    sandbox: Path
    schedule: str = ""
    candidates: list[Candidate] = field(default_factory=list)
    attempts_source: Callable[[], tuple[Attempt, ...]] | None = None
    votes: list[Vote] = field(default_factory=list)
    refused_votes: list[str] = field(default_factory=list)  # why; the run ends `partial`
    subagents: list[Subagent] = field(default_factory=list)
    deadline: float | None = None  # time.monotonic() by which the agent must be done
    parent_key: str = ""
    subagent: str = ""
    searcher: Searcher | None = None
    reader: Reader | None = None
    spawner: Spawner | None = None
    cancel_check: Callable[[], bool] | None = None
    _attempts: tuple[Attempt, ...] | None = field(default=None, init=False, repr=False)
    _given: dict[str, Memory] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._given.update((m.id, m) for m in self.memories)

    @property
    def given_ids(self) -> list[str]:
        """Ids of the memories this run was given: the load first, then those it found
        with `search` or `read`, in the order it got them."""
        return list(self._given)

    @property
    def attempts(self) -> tuple[Attempt, ...]:
        """Earlier attempts at this goal in this scope, newest first: read on first use,
        so an agent that never looks costs no query."""
        if self._attempts is None:
            self._attempts = self.attempts_source() if self.attempts_source else ()
        return self._attempts

    def remember(
        self,
        content: str,
        *,
        kind: str = "fact",
        key: str = "",
        source: str = "inferred",
        reference: str = "",
        layer: str = "private",
        subject: str = "",
        evidence: str = "",
        valid_to: datetime | None = None,
    ) -> Candidate:
        """Propose a memory. The writer's gate decides whether it is kept.

        In a run for a person, ``layer="agent"`` (read by every user of this agent)
        waits for an operator's review unless the agent's rules publish it
        (`memory.attachment`, ``publish_from_user_runs``). `content` and the other
        texts must be `str`: anything else raises `TypeError` naming the argument."""
        texts = {
            "content": content,
            "key": key,
            "reference": reference,
            "subject": subject,
            "evidence": evidence,
        }
        for name, value in texts.items():
            if not isinstance(value, str):
                raise TypeError(f"ctx.remember: {name} must be text (a str), not {_a(value)}")
        candidate = Candidate(
            scope=self.scope.at(Layer(layer)),
            kind=Kind(kind),
            content=content,
            key=key,
            evidence=evidence,
            valid_to=valid_to,
            provenance=Provenance(
                source=Source(source),
                reference=reference,
                run_id=self.run_key,
                task_id=self.run_key,
                agent=self.agent,
                schedule=self.schedule,
                subject=subject or self.scope.user,
            ),
        )
        self.candidates.append(candidate)
        return candidate

    def search(self, query: str, limit: int = 10) -> list[Memory]:
        """Memories of the readable scopes matching `query` (cold memory on demand)."""
        found = list(self.searcher(query, limit)) if self.searcher else []
        self._given.update((m.id, m) for m in found)
        return found

    def read(self, memory_id: str) -> Memory | None:
        """One memory by id, if this run's scope may read it."""
        if memory_id in self._given:
            return self._given[memory_id]
        found = self.reader(memory_id) if self.reader else None
        if found is not None:
            self._given[found.id] = found
        return found

    def vote(self, memory_id: str, direction: str) -> Vote:
        """Up-vote a memory you checked and found true, down-vote one you found wrong.

        Only a memory this run was given can be voted on (loaded for it, or found with
        `search` or `read`), and a down-vote cannot silence the person's or the
        operator's word (`memory.vote_rights`): otherwise `VoteRefused` says why, the
        vote is not recorded, and the reason is kept in `refused_votes` (the run ends
        `partial` with it, caught or not). The memory writer checks the vote again
        against the run's record, which is what counts.
        """
        vote = Vote(memory_id, direction)
        given = self._given.get(memory_id)
        verdict = judge_vote(
            memory_id, direction, given.source if given else None, given=self._given.keys()
        )
        if verdict.fate is Fate.REFUSED:
            self.refused_votes.append(f"vote {direction}: {verdict.reason}")
            raise VoteRefused(verdict.reason)
        self.votes.append(vote)
        return vote

    def spawn(
        self,
        agent: str,
        *,
        name: str = "",
        goal: str = "",
        payload: Mapping[str, Any] | None = None,
        time_limit: int | None = None,
    ) -> Subagent:
        """Start a subagent run now; this run may finish before it does."""
        if self.spawner is None:
            raise RuntimeError("this run cannot spawn subagents (no spawner configured)")
        request = SpawnRequest(
            name=name or f"{agent}-{len(self.subagents) + 1}",
            agent=agent,
            goal=goal,
            payload=dict(payload or {}),
            time_limit=time_limit,
        )
        child = self.spawner(request)
        self.subagents.append(child)
        return child

    def cancelled(self) -> bool:
        """Whether someone (the parent, the operator) asked this run to stop."""
        return bool(self.cancel_check and self.cancel_check())

    def check_cancelled(self) -> None:
        if self.cancelled():
            raise RunCancelled("cancel requested")


Agent = Callable[[RunContext], AgentResult | None]


def reads_files(agent: Agent) -> bool:
    """Whether `agent` reads its memory as files in the sandbox (`AGENTS.md`, `memory/`,
    `trigger.json`): a command agent does; a Python callable or the LLM loop gets it as
    objects and tools, unless the callable sets `reads_files = True` on itself."""
    return bool(getattr(agent, "reads_files", False))


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """A configured agent: its name, its adapter and the adapter's target."""

    name: str
    adapter: str  # python | command | llm
    target: str

    @classmethod
    def parse(cls, name: str, raw: str) -> AgentSpec:
        prefix, sep, rest = raw.partition(":")
        if sep and prefix in ADAPTERS and rest.strip():
            return cls(name, prefix, rest.strip())
        return cls(name, "python", raw.strip())


def known_agents(configured: Mapping[str, str]) -> dict[str, str]:
    return {**BUILTIN_AGENTS, **configured}


def spec_of(name: str, configured: Mapping[str, str]) -> AgentSpec:
    agents = known_agents(configured)
    if name not in agents:
        raise UnknownAgentError(name, list(agents))
    return AgentSpec.parse(name, agents[name])


def resolve(name: str, configured: Mapping[str, str], settings: Settings | None = None) -> Agent:
    """The callable for agent `name`; `UnknownAgentError` if it is not configured."""
    spec = spec_of(name, configured)
    known = list(known_agents(configured))
    if spec.adapter == "command":
        from workers.adapters.command import CommandAgent

        try:
            return CommandAgent.from_target(spec.target, settings)
        except ValueError as error:
            raise UnknownAgentError(name, known, str(error)) from None
    if spec.adapter == "llm":
        from workers.adapters.llm import LlmAgent

        return LlmAgent.from_target(spec.target, settings)
    module_name, _, attribute = spec.target.partition(":")
    try:
        target = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError, ValueError) as error:
        raise UnknownAgentError(name, known, f"cannot import {spec.target}") from error
    if not callable(target):
        raise UnknownAgentError(name, known, f"{spec.target} is not callable")
    return target
