"""Reinforcement and decay: votes from runs and operators, and a score that fades.

A memory's stored `score` is its reinforcement as of `last_reinforced_at`; its
effective score halves every `half_life_days` after that. Votes arrive in
batches (through the memory writer) and are applied set-based, a few UPDATEs
per batch whatever its size:

- up:   score = min(effective + UP_STEP, MAX_SCORE), last_reinforced_at = now
        (this also restarts the expiry clock);
- down: score = max(score - DOWN_STEP, 0).

Being loaded or searched never touches either column. Below the load bar
(`LoadBounds.min_score`) a memory is not loaded; `decay()` writes the effective
score back only for rows that crossed the bar, so the pass touches few rows.
`ranking_multiplier` is the pure, bounded form the loader multiplies in.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Float,
    and_,
    case,
    func,
    insert,
    literal,
    select,
    update,
)

from memory.maintenance_tables import vote_batches
from memory.tables import ACTIVE_ROW, Timestamp, memories

UP_STEP = 0.25
DOWN_STEP = 0.5
MAX_SCORE = 2.0
DEFAULT_HALF_LIFE_DAYS = 90.0
DEFAULT_MIN_SCORE = 0.25
MIN_MULTIPLIER = 0.5
MAX_MULTIPLIER = 1.5
_CHUNK = 500


class Direction(enum.StrEnum):
    UP = "up"
    DOWN = "down"


class VoteError(ValueError):
    """A vote message is malformed; the message says which field."""


@dataclass(frozen=True, slots=True)
class Vote:
    """One run's or operator's verdict on a memory it checked.

    The message shape on the writer queue (and `RunContext.vote`) is
    `{"memory_id": str, "direction": "up"|"down", "voter": str, "run_id": str}`.
    """

    memory_id: str
    direction: Direction
    voter: str
    run_id: str = ""

    def to_json(self) -> dict[str, str]:
        return {
            "memory_id": self.memory_id,
            "direction": self.direction.value,
            "voter": self.voter,
            "run_id": self.run_id,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Vote:
        for name in ("memory_id", "direction", "voter"):
            if not isinstance(data.get(name), str) or not data[name]:
                raise VoteError(f"vote {dict(data)!r}: field {name!r} must be a non-empty string")
        try:
            direction = Direction(data["direction"])
        except ValueError:
            raise VoteError(
                f"vote field 'direction' is {data['direction']!r}; use up or down"
            ) from None
        return cls(data["memory_id"], direction, data["voter"], str(data.get("run_id", "")))


@dataclass(frozen=True, slots=True)
class VoteReport:
    up: int
    down: int
    applied: int  # memories changed
    unknown: tuple[str, ...]  # ids that are not active memories
    duplicate: bool = False  # the batch handle was applied before

    def to_json(self) -> dict[str, Any]:
        return {
            "up": self.up,
            "down": self.down,
            "applied": self.applied,
            "unknown": list(self.unknown),
            "duplicate": self.duplicate,
        }


def decay_factor(age_days: float, half_life_days: float = DEFAULT_HALF_LIFE_DAYS) -> float:
    return math.exp(-math.log(2) * max(age_days, 0.0) / half_life_days)


def effective_score(
    score: float,
    last_reinforced_at: datetime,
    now: datetime,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
) -> float:
    age = (now - last_reinforced_at).total_seconds() / 86400
    return min(max(score, 0.0), MAX_SCORE) * decay_factor(age, half_life_days)


def ranking_multiplier(
    score: float,
    last_reinforced_at: datetime,
    now: datetime,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
) -> float:
    """A factor in [0.5, 1.5] for the loader's rank: 1.0 for a fresh, unvoted memory.

    Grows with up-votes, shrinks with down-votes and with time since the last
    reinforcement. Pure; never reads or writes the store.
    """
    value = (
        MIN_MULTIPLIER + effective_score(score, last_reinforced_at, now, half_life_days) / MAX_SCORE
    )
    return min(max(value, MIN_MULTIPLIER), MAX_MULTIPLIER)


def after_votes(
    score: float,
    last_reinforced_at: datetime,
    net: int,
    now: datetime,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
) -> tuple[float, datetime]:
    """`(score, last_reinforced_at)` after a batch nets `net` votes: what `apply_votes` writes."""
    if net > 0:
        raised = effective_score(score, last_reinforced_at, now, half_life_days) + UP_STEP * net
        return min(raised, MAX_SCORE), now
    if net < 0:
        return max(score - DOWN_STEP * -net, 0.0), last_reinforced_at
    return score, last_reinforced_at


def age_days_sql(column: Any, now: datetime, dialect: str) -> ColumnElement[Any]:
    """Days from `column` to `now`, computed in the database."""
    at = literal(now, Timestamp())
    if dialect == "postgresql":
        return func.extract("epoch", at - column) / 86400.0
    return func.julianday(at) - func.julianday(column)


def effective_score_sql(now: datetime, dialect: str, half_life_days: float) -> ColumnElement[float]:
    age = age_days_sql(memories.c.last_reinforced_at, now, dialect)
    rate = literal(-math.log(2) / half_life_days, Float())
    floor = func.greatest if dialect == "postgresql" else func.max  # SQLite's max(a, b) is scalar
    return memories.c.score * func.exp(rate * floor(age, 0.0))


def apply_votes(
    conn: Connection,
    votes: Iterable[Vote],
    now: datetime,
    *,
    handle: str = "",
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
) -> VoteReport:
    """Apply a batch of votes in the caller's transaction, set-based.

    One vote per (memory, voter) counts in a batch; a memory's ups and downs net
    out. With `handle`, a batch seen before is a no-op (a redelivered message).
    """
    if (
        handle
        and conn.execute(
            select(vote_batches.c.handle).where(vote_batches.c.handle == handle)
        ).first()
    ):
        return VoteReport(0, 0, 0, (), duplicate=True)
    latest: dict[tuple[str, str], Direction] = {}
    for vote in votes:
        latest[(vote.memory_id, vote.voter)] = vote.direction
    net: dict[str, int] = {}
    for (memory_id, _), direction in latest.items():
        net[memory_id] = net.get(memory_id, 0) + (1 if direction is Direction.UP else -1)
    groups: dict[int, list[str]] = {}
    for memory_id, n in net.items():
        groups.setdefault(n, []).append(memory_id)
    dialect = conn.dialect.name
    applied = 0
    for n, ids in groups.items():
        for chunk in _chunks(ids):
            applied += _apply_group(conn, n, chunk, now, dialect, half_life_days)
    known = _active_ids(conn, list(net))
    if handle:
        conn.execute(insert(vote_batches).values(handle=handle, applied_at=now, votes=len(latest)))
    ups = sum(1 for d in latest.values() if d is Direction.UP)
    return VoteReport(ups, len(latest) - ups, applied, tuple(sorted(set(net) - known)))


def _apply_group(
    conn: Connection, n: int, ids: list[str], now: datetime, dialect: str, half_life_days: float
) -> int:
    active = and_(memories.c.id.in_(ids), ACTIVE_ROW)
    if n > 0:
        raised = effective_score_sql(now, dialect, half_life_days) + UP_STEP * n
        values: dict[str, Any] = {
            "score": case((raised > MAX_SCORE, MAX_SCORE), else_=raised),
            "last_reinforced_at": now,
        }
    elif n < 0:
        lowered = memories.c.score - DOWN_STEP * -n
        values = {"score": case((lowered < 0.0, 0.0), else_=lowered)}
    else:
        return 0
    return int(conn.execute(update(memories).where(active).values(**values)).rowcount or 0)


def _active_ids(conn: Connection, ids: Sequence[str]) -> set[str]:
    out: set[str] = set()
    for chunk in _chunks(ids):
        query = select(memories.c.id).where(memories.c.id.in_(chunk), ACTIVE_ROW)
        out.update(conn.execute(query).scalars())
    return out


def decay(
    conn: Connection,
    now: datetime,
    *,
    tenant: str | None = None,
    min_score: float = DEFAULT_MIN_SCORE,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
    dry_run: bool = False,
    among: ColumnElement[bool] | None = None,
) -> int:
    """Write back the decayed score of active memories that fell below the load bar.

    One UPDATE; rows still above the bar are left alone (their decay is applied
    at read time by `ranking_multiplier`), so a pass costs a scan, not a rewrite.
    `among` narrows the rows looked at (a pass goes a range of ids at a time).
    """
    effective = effective_score_sql(now, conn.dialect.name, half_life_days)
    where = and_(
        ACTIVE_ROW,
        memories.c.score >= min_score,
        effective < min_score,
        memories.c.tenant == tenant if tenant is not None else literal(True),
        among if among is not None else literal(True),
    )
    if dry_run:
        return int(conn.execute(select(func.count()).where(where)).scalar_one())
    return int(conn.execute(update(memories).where(where).values(score=effective)).rowcount or 0)


def below_bar_clause(
    now: datetime,
    dialect: str,
    min_score: float = DEFAULT_MIN_SCORE,
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
) -> ColumnElement[bool]:
    """True for rows whose decayed score is under the bar (for an immediate loader filter)."""
    return effective_score_sql(now, dialect, half_life_days) < min_score


def _chunks(ids: Sequence[str]) -> Iterable[list[str]]:
    items = list(ids)
    for start in range(0, len(items), _CHUNK):
        yield items[start : start + _CHUNK]
