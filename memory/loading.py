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

from memory.records import Kind, Memory

HOT_KINDS = (Kind.INSTRUCTION, Kind.PREFERENCE, Kind.GOAL)
COLD_KINDS = (Kind.FACT, Kind.EPISODE)

RELEVANCE_WEIGHT = 0.55
CONFIDENCE_WEIGHT = 0.2
REINFORCEMENT_WEIGHT = 0.1
RECENCY_WEIGHT = 0.15
RECENCY_HALF_LIFE_DAYS = 14.0


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


def rank(pool: Sequence[tuple[Memory, float]], now: datetime) -> list[Memory]:
    """Order `(memory, text relevance)` pairs best first. Pure; ties break by id."""
    top = max((rel for _, rel in pool), default=0.0) or 1.0

    def score(item: tuple[Memory, float]) -> tuple[float, str]:
        memory, relevance = item
        age_days = max((now - memory.last_reinforced_at).total_seconds(), 0.0) / 86400
        recency = math.exp(-math.log(2) * age_days / RECENCY_HALF_LIFE_DAYS)
        reinforcement = min(max(memory.score, 0.0), 2.0) / 2.0
        total = (
            RELEVANCE_WEIGHT * (relevance / top)
            + CONFIDENCE_WEIGHT * memory.confidence
            + REINFORCEMENT_WEIGHT * reinforcement
            + RECENCY_WEIGHT * recency
        )
        return (-total, memory.id)

    return [m for m, _ in sorted(pool, key=score)]


def bound(memories: Sequence[Memory], limit: int, max_chars: int) -> list[Memory]:
    """The longest prefix that fits both bounds; a memory never arrives cut in half."""
    out: list[Memory] = []
    used = 0
    for memory in memories:
        if len(out) >= limit or used + len(memory.content) > max_chars:
            break
        out.append(memory)
        used += len(memory.content)
    return out
