"""Fires and what became of them.

A *fire* is one instant at which a schedule is due. It becomes a run (key
`schedule@fire-time`, unique in the database) or it is recorded here with the
reason it did not: overlap, paused, max_runs, outside active hours or outside
the catch-up window. Consecutive fires of one schedule skipped for the same
reason share one row (`fire_time`..`last_fire_time`, `count`), so a paused
one-second heartbeat adds one row, not 86,400 a day.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Connection, and_, delete, func, insert, select, update

from schedules.definition import Schedule
from schedules.tables import as_utc, fires


def run_key(name: str, fire_time: datetime) -> str:
    """The run key of a fire: `schedule@fire-time` (UTC, microseconds), unique in the database."""
    return f"{name}@{fire_time.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}"


class Origin(enum.StrEnum):
    BEAT = "beat"  # the schedule's own timer
    TRIGGER = "trigger"  # `schedules trigger NAME`: run now
    BACKFILL = "backfill"  # `schedules backfill NAME --from --to`


class FireOutcome(enum.StrEnum):
    RUN = "run"  # a run was created and sent
    DUPLICATE = "duplicate"  # its run key existed already (sent before): not sent again
    BUFFERED = "buffered"  # overlap buffer_one: waits for the running run to finish
    SKIPPED = "skipped"  # no run; see the reason


class SkipReason(enum.StrEnum):
    OVERLAP = "overlap"  # the previous run was still going (skip, or buffer_one's buffer full)
    PAUSED = "paused"
    MAX_RUNS = "max_runs"
    INACTIVE_HOURS = "outside_active_hours"
    CATCHUP_WINDOW = "outside_catchup_window"  # missed for longer than catchup_window
    CATCHUP_POLICY = "catchup_policy"  # missed; catchup none, or latest and not the latest
    REFUSED = "refused"  # the run store refused its run (a value it cannot hold): see detail


@dataclass(frozen=True, slots=True)
class Fire:
    """A fire to turn into a run."""

    schedule: Schedule
    fire_time: datetime
    origin: Origin = Origin.BEAT

    @property
    def run_key(self) -> str:
        return run_key(self.schedule.name, self.fire_time)


@dataclass(frozen=True, slots=True)
class FireRecord:
    schedule: str
    fire_time: datetime
    outcome: FireOutcome
    reason: SkipReason | None = None
    run_key: str = ""
    origin: Origin = Origin.BEAT
    detail: str = ""
    last_fire_time: datetime | None = None
    count: int = 1
    id: int = 0
    recorded_at: datetime | None = None
    decided_by: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "fire_time": self.fire_time.isoformat(),
            "last_fire_time": (self.last_fire_time or self.fire_time).isoformat(),
            "count": self.count,
            "outcome": self.outcome.value,
            "reason": self.reason.value if self.reason else "",
            "run_key": self.run_key,
            "origin": self.origin.value,
            "detail": self.detail,
            "decided_by": self.decided_by,
            "recorded_at": self.recorded_at.isoformat() if self.recorded_at else None,
        }


def refused_record(fire: Fire, why: str) -> FireRecord:
    """The record of a fire whose run the run store refused (`RunsRefusedError`)."""
    return FireRecord(
        fire.schedule.name,
        fire.fire_time,
        FireOutcome.SKIPPED,
        SkipReason.REFUSED,
        fire.run_key,
        fire.origin,
        f"its run could not be stored ({why}); apply the schedule's file again to check it",
    )


def record(
    conn: Connection, records: Iterable[FireRecord], now: datetime, decided_by: str = ""
) -> None:
    """Store what became of each fire; a skip extends the schedule's latest row when
    that row is a skip for the same reason."""
    runs: list[dict[str, object]] = []
    for r in records:
        if r.outcome is FireOutcome.SKIPPED and _extend_latest_skip(conn, r):
            continue
        runs.append(
            {
                "schedule": r.schedule,
                "fire_time": r.fire_time,
                "last_fire_time": r.last_fire_time or r.fire_time,
                "count": r.count,
                "outcome": r.outcome.value,
                "reason": r.reason.value if r.reason else "",
                "run_key": r.run_key,
                "origin": r.origin.value,
                "detail": r.detail,
                "decided_by": decided_by,
                "recorded_at": now,
            }
        )
        if r.outcome is FireOutcome.SKIPPED:  # later skips of this batch may extend it
            conn.execute(insert(fires), runs)
            runs = []
    if runs:
        conn.execute(insert(fires), runs)


def _extend_latest_skip(conn: Connection, r: FireRecord) -> bool:
    latest = select(func.max(fires.c.id)).where(fires.c.schedule == r.schedule).scalar_subquery()
    result = conn.execute(
        update(fires)
        .where(
            and_(
                fires.c.id == latest,
                fires.c.outcome == FireOutcome.SKIPPED.value,
                fires.c.reason == (r.reason.value if r.reason else ""),
                fires.c.origin == r.origin.value,
            )
        )
        .values(
            last_fire_time=r.last_fire_time or r.fire_time,
            count=fires.c.count + r.count,
        )
    )
    return result.rowcount == 1


def prune(conn: Connection, before: datetime, *, limit: int = 1000) -> int:
    """Delete up to `limit` fire records whose last fire was before `before`, oldest first.

    History only: when a schedule last fired lives on the schedule itself
    (`last_fire_at`), so no decision of the beat reads these rows. Walks the
    primary key, so a pass costs its batch.
    """
    oldest = (
        select(fires.c.id)
        .where(fires.c.last_fire_time < before)
        .order_by(fires.c.id)
        .limit(limit)
        .scalar_subquery()
    )
    return conn.execute(delete(fires).where(fires.c.id.in_(oldest))).rowcount


def recent(
    conn: Connection, schedule: str, *, limit: int = 10, skipped_only: bool = False
) -> list[FireRecord]:
    """The schedule's latest fire records, newest first."""
    query = select(fires).where(fires.c.schedule == schedule).order_by(fires.c.id.desc())
    if skipped_only:
        query = query.where(fires.c.outcome != FireOutcome.RUN.value)
    return [_from_row(r) for r in conn.execute(query.limit(limit))]


def _from_row(row: object) -> FireRecord:
    r = row._mapping  # type: ignore[attr-defined]
    return FireRecord(
        id=r["id"],
        schedule=r["schedule"],
        fire_time=as_utc(r["fire_time"]),  # type: ignore[arg-type]
        last_fire_time=as_utc(r["last_fire_time"]),
        count=r["count"],
        outcome=FireOutcome(r["outcome"]),
        reason=SkipReason(r["reason"]) if r["reason"] else None,
        run_key=r["run_key"],
        origin=Origin(r["origin"]),
        detail=r["detail"],
        decided_by=r["decided_by"],
        recorded_at=as_utc(r["recorded_at"]),
    )
