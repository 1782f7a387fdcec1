"""Candidates as a run, a person or an operator would submit them."""

from __future__ import annotations

import dataclasses
from typing import Any

from memory.records import Candidate, Kind, Provenance, Scope, Source

ANA = Scope("acme", "ana", "triage")


def candidate(
    content: str,
    *,
    scope: Scope = ANA,
    key: str = "",
    source: Source = Source.OBSERVED,
    task: str = "run-1",
    kind: Kind = Kind.FACT,
    agent: str = "triage",
    **extra: Any,
) -> Candidate:
    return Candidate(
        scope=scope,
        kind=kind,
        content=content,
        key=key,
        provenance=Provenance(
            source=source,
            task_id=task,
            run_id=task,
            agent=agent,
            reference=extra.pop("reference", "feed#1"),
            subagent=extra.pop("subagent", ""),
            schedule=extra.pop("schedule", ""),
        ),
        **extra,
    )


def acting_for(made: Candidate, person: str) -> Candidate:
    """`made` as the memory writer passes on a run's candidate: stamped with the person
    the run acted for, read from the run's record."""
    return made.replace(provenance=dataclasses.replace(made.provenance, acting_for=person))
