"""Ranked, bounded loading at the start of a run.

A heartbeat has no message, so memory is ranked against the run's goal and
trigger: text relevance first, then how much the source is trusted, how well the
memory has been reinforced, and how recent it is. Hot memory (instructions,
preferences and goals of the readable scopes) always comes first. The load is
bounded by count and by characters; what does not fit stays cold, searchable on
demand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from memory.records import Kind, Memory
from memory.reinforcement import ranking_multiplier

HOT_KINDS = (Kind.INSTRUCTION, Kind.PREFERENCE, Kind.GOAL)
COLD_KINDS = (Kind.FACT, Kind.EPISODE)

# The weighted sum is then scaled by reinforcement.ranking_multiplier (0.5–1.5):
# up-votes raise a memory, down-votes and time since the last reinforcement lower it.
RELEVANCE_WEIGHT = 0.6
CONFIDENCE_WEIGHT = 0.2
RECENCY_WEIGHT = 0.2
RECENCY_HALF_LIFE_DAYS = 14.0


class Rankable(Protocol):
    """What ranking needs of a memory; a `Memory` has it, and so does a `Ranked` row."""

    @property
    def id(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def confidence(self) -> float: ...
    @property
    def score(self) -> float: ...
    @property
    def last_reinforced_at(self) -> datetime: ...


R = TypeVar("R", bound=Rankable)


@dataclass(frozen=True, slots=True)
class Ranked:
    """The few columns ranking reads (the SQL backend keeps the rest of each pool row
    aside, so the winners need no second query; see `ranking_queries.load_pools`)."""

    id: str
    kind: Kind
    content: str
    confidence: float
    score: float
    last_reinforced_at: datetime


@dataclass(frozen=True, slots=True)
class Loaded:
    """What a run was given. `ids` is what the run record keeps."""

    hot: tuple[Memory, ...]
    ranked: tuple[Memory, ...]

    @property
    def ids(self) -> list[str]:
        return [m.id for m in (*self.hot, *self.ranked)]

    def __len__(self) -> int:
        return len(self.hot) + len(self.ranked)


def rank(pool: Sequence[tuple[R, float]], now: datetime) -> list[R]:
    """Order `(memory, text relevance)` pairs best first. Pure; ties break by id."""
    top = max((rel for _, rel in pool), default=0.0) or 1.0

    def score(item: tuple[R, float]) -> tuple[float, str]:
        memory, relevance = item
        age_days = max((now - memory.last_reinforced_at).total_seconds(), 0.0) / 86400
        recency = math.exp(-math.log(2) * age_days / RECENCY_HALF_LIFE_DAYS)
        total = (
            RELEVANCE_WEIGHT * (relevance / top)
            + CONFIDENCE_WEIGHT * memory.confidence
            + RECENCY_WEIGHT * recency
        ) * ranking_multiplier(memory.score, memory.last_reinforced_at, now)
        return (-total, memory.id)

    return [m for m, _ in sorted(pool, key=score)]


def bound(memories: Sequence[R], limit: int, max_chars: int) -> list[R]:
    """The longest prefix that fits both bounds; a memory never arrives cut in half."""
    out: list[R] = []
    used = 0
    for memory in memories:
        if len(out) >= limit or used + len(memory.content) > max_chars:
            break
        out.append(memory)
        used += len(memory.content)
    return out
