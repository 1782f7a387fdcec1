"""The agent interface: a Python callable that takes a `RunContext`.

    def my_agent(ctx: RunContext) -> AgentResult:
        seen = {m.key for m in ctx.memories}
        for item in fetch_new_items(skip=seen):
            ctx.remember(f"saw {item.title}", key=f"item.{item.id}", source="observed")
        return AgentResult(summary="checked the feed")

Agents are named; a deployment maps names to import paths with
`NIGHTSHIFT_AGENTS="name=package.module:callable;…"`. The demo agent is built in.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from memory.records import Candidate, Kind, Layer, Memory, Provenance, Scope, Source

BUILTIN_AGENTS: Mapping[str, str] = {
    "feed-watcher": "workers.demo.agent:feed_watcher",
}


class UnknownAgentError(LookupError):
    """The agent named by a schedule, trigger or CLI call is not configured."""

    def __init__(self, name: str, known: Sequence[str]) -> None:
        super().__init__(
            f"unknown agent {name!r}; configured agents: {', '.join(sorted(known)) or 'none'} "
            "(add one with NIGHTSHIFT_AGENTS='name=package.module:callable')"
        )
        self.name = name


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
    summary: str = ""
    candidates: Sequence[Candidate] = ()


@dataclass
class RunContext:
    """What an agent gets: who it runs for, why, what it remembers, and where it may write."""

    run_key: str
    agent: str
    scope: Scope
    goal: str
    trigger: Trigger
    memories: tuple[Memory, ...]
    sandbox: Path
    schedule: str = ""
    candidates: list[Candidate] = field(default_factory=list)

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
        """Propose a memory. The writer's gate decides whether it is kept."""
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


Agent = Callable[[RunContext], AgentResult | None]


def known_agents(configured: Mapping[str, str]) -> dict[str, str]:
    return {**BUILTIN_AGENTS, **configured}


def resolve(name: str, configured: Mapping[str, str]) -> Agent:
    """The callable for agent `name`; `UnknownAgentError` if it is not configured."""
    agents = known_agents(configured)
    if name not in agents:
        raise UnknownAgentError(name, list(agents))
    module_name, _, attribute = agents[name].partition(":")
    try:
        target = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise UnknownAgentError(name, list(agents)) from error
    if not callable(target):
        raise UnknownAgentError(name, list(agents))
    return target
