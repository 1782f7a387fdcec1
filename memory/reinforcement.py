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

Because a down-vote can take a memory out of loading, a vote counts only where its
voter has the right (`memory.vote_rights`): a run on what it was given, the
operator on its tenant, no agent against a person's word. `apply_votes` enforces
it in the same transaction and reports, and audits, every vote it refuses.
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
from memory.port import AuditEntry
from memory.queries import record_audit
from memory.records import SOURCES, Source
from memory.tables import ACTIVE_ROW, Timestamp, audit, memories
from memory.vote_rights import (
    NO_RUN,
    NOT_AN_ID,
    Fate,
    VoteRights,
    VoteVerdict,
    judge,
    shown_id,
)

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
class RefusedVote:
    """A vote that changed nothing, and why (`memory.vote_rights`). Ids and reason only,
    never memory content: it is safe to return, log and audit."""

    memory_id: str  # as `vote_rights.shown_id` shows it
    direction: Direction
    voter: str
    run_id: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {
            "memory_id": self.memory_id,
            "direction": self.direction.value,
            "voter": self.voter,
            "run_id": self.run_id,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class VoteReport:
    up: int  # votes that were not refused, by direction
    down: int
    applied: int  # memories changed
    unknown: tuple[str, ...]  # ids that are not active memories of the voter's tenant
    duplicate: bool = False  # the batch handle was applied before
    refused: tuple[RefusedVote, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "up": self.up,
            "down": self.down,
            "applied": self.applied,
            "unknown": list(self.unknown),
            "duplicate": self.duplicate,
            "refused": [r.to_json() for r in self.refused],
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
    rights: Mapping[str, VoteRights],
    handle: str = "",
    half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
) -> VoteReport:
    """Apply the votes of a batch that count, in the caller's transaction, set-based.

    `rights` says what each voter may vote on, keyed by the vote's `run_id` (a run's
    rights come from its record; the operator's votes name no run, so theirs sit
    under ""). A vote whose run has no entry is refused; the others are judged by
    `memory.vote_rights.judge`, each id looked up among the active memories of its
    voter's tenant only (another tenant's row is never read). A refused vote changes
    nothing; it is in the report and in the audit trail (`vote.refused`, its reason,
    no content). One vote per (memory, voter) counts in a batch; a memory's ups and
    downs net out. With `handle`, a batch seen before is a no-op (a redelivery).
    """
    if (
        handle
        and conn.execute(
            select(vote_batches.c.handle).where(vote_batches.c.handle == handle)
        ).first()
    ):
        return VoteReport(0, 0, 0, (), duplicate=True)
    latest: dict[tuple[str, str], Vote] = {}
    for vote in votes:
        latest[(vote.memory_id, vote.voter)] = vote
    sources = _active_sources(conn, latest.values(), rights)
    net: dict[str, int] = {}
    unknown: set[str] = set()
    refused: list[RefusedVote] = []
    ups = 0
    for vote in latest.values():
        verdict = _judged(vote, rights.get(vote.run_id), sources)
        if verdict.fate is Fate.REFUSED:
            refused.append(
                RefusedVote(
                    shown_id(vote.memory_id),
                    vote.direction,
                    vote.voter,
                    vote.run_id,
                    verdict.reason,
                )
            )
            continue
        up = vote.direction is Direction.UP
        ups += up
        if verdict.fate is Fate.UNKNOWN:
            unknown.add(vote.memory_id)
            continue
        net[vote.memory_id] = net.get(vote.memory_id, 0) + (1 if up else -1)
    groups: dict[int, list[str]] = {}
    for memory_id, n in net.items():
        groups.setdefault(n, []).append(memory_id)
    dialect = conn.dialect.name
    applied = 0
    for n, ids in groups.items():
        for chunk in _chunks(ids):
            applied += _apply_group(conn, n, chunk, now, dialect, half_life_days)
    _audit_refused(conn, refused, rights, now)
    if handle:
        conn.execute(insert(vote_batches).values(handle=handle, applied_at=now, votes=len(latest)))
    counted = len(latest) - len(refused)
    return VoteReport(ups, counted - ups, applied, tuple(sorted(unknown)), refused=tuple(refused))


def _judged(
    vote: Vote, rights: VoteRights | None, sources: Mapping[tuple[str, str], Source]
) -> VoteVerdict:
    if rights is None:
        return NO_RUN
    source = sources.get((rights.tenant, vote.memory_id))
    return judge(vote.memory_id, vote.direction, source, given=rights.given)


def _active_sources(
    conn: Connection, votes: Iterable[Vote], rights: Mapping[str, VoteRights]
) -> dict[tuple[str, str], Source]:
    """`(tenant, id) → source` of the active memories the votes could reach: each id
    is looked up in its voter's tenant only, and a run's only if it was given."""
    wanted: dict[str, set[str]] = {}
    for vote in votes:
        who = rights.get(vote.run_id)
        if who is not None and (who.given is None or vote.memory_id in who.given):
            wanted.setdefault(who.tenant, set()).add(vote.memory_id)
    out: dict[tuple[str, str], Source] = {}
    for tenant, ids in wanted.items():
        for chunk in _chunks(sorted(ids)):
            query = select(memories.c.id, memories.c.source).where(
                memories.c.tenant == tenant, memories.c.id.in_(chunk), ACTIVE_ROW
            )
            for memory_id, source in conn.execute(query):
                out[(tenant, memory_id)] = SOURCES[source]
    return out


def _audit_refused(
    conn: Connection,
    refused: Sequence[RefusedVote],
    rights: Mapping[str, VoteRights],
    now: datetime,
) -> None:
    def tenant_of(vote: RefusedVote) -> str:
        who = rights.get(vote.run_id)
        return who.tenant if who is not None else ""

    record_audit(
        conn,
        (
            AuditEntry(
                at=now,
                actor=vote.voter[:_ACTOR_CHARS],
                action="vote.refused",
                memory_id=None if vote.memory_id == NOT_AN_ID else vote.memory_id,
                tenant=tenant_of(vote)[:_TENANT_CHARS],
                detail={
                    "direction": vote.direction.value,
                    "run": vote.run_id,
                    "reason": vote.reason,
                },
            )
            for vote in refused
        ),
    )


_ACTOR_CHARS: int = audit.c.actor.type.length  # type: ignore[attr-defined]
_TENANT_CHARS: int = audit.c.tenant.type.length  # type: ignore[attr-defined]


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
