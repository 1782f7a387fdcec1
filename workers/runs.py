"""Run records: the database's view of every run, and the lease that keeps it honest.

A run row is created when a run is enqueued (its key is unique, so a second beat
or a repeated event cannot create it twice), claimed by exactly one worker under
a lease, renewed while it works, and finished with a status. A reaper re-enqueues
runs whose lease lapsed: that covers a killed worker on a broker that cannot
redeliver, and a run longer than the broker's visibility timeout, whose second
delivery finds the lease held and does nothing.
"""

from __future__ import annotations

import enum
import hashlib
import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    Connection,
    Text,
    and_,
    bindparam,
    case,
    delete,
    func,
    or_,
    select,
    update,
)

from memory.dialect import insert_ignoring_conflicts
from memory.records import quote_part
from memory.redaction import redact, redact_json
from memory.storable import made_storable, unstorable
from schedules.definition import MAX_PAYLOAD_DEPTH, nesting_depth
from workers.tables import runs

RUN_KEY_CHARS: int = runs.c.key.type.length  # type: ignore[attr-defined]


def fit(prefix: str, text: str, limit: int) -> str:
    """`prefix + text`, or, when that is longer than `limit`, `prefix`, the start of
    `text` and "~" with 16 hex digits of `text`'s SHA-256: the same text always fits
    the same way, so a key made from it still deduplicates."""
    whole = prefix + text
    if len(whole) <= limit:
        return whole
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"{prefix}{text[: limit - len(prefix) - 17]}~{digest}"


def trigger_key(agent: str, tenant: str, user: str, event_id: str = "") -> str:
    """The key of a run triggered now: `agent/tenant/user@event:id`, the same for the
    same event in the same scope (so it makes one run), or `…@manual:<uuid4>`, new
    each time, without an event id. A long event id is shortened with its hash
    (`fit`): the same event still makes one run."""
    scope = (quote_part(agent), quote_part(tenant), quote_part(user) if user else "*")
    trigger = f"event:{quote_part(event_id)}" if event_id else f"manual:{uuid.uuid4()}"
    return fit("", f"{'/'.join(scope)}@{trigger}", RUN_KEY_CHARS)


class RunStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"  # the agent, or its parent, cancelled it
    PARTIAL = "partial"  # finished, but some of its output was refused (see `error`)
    REJECTED = "rejected"  # finished, but broke a sandbox rule; none of its output was kept


FINISHED = frozenset(
    {
        RunStatus.SUCCEEDED,
        RunStatus.FAILED,
        RunStatus.TIMED_OUT,
        RunStatus.CANCELLED,
        RunStatus.PARTIAL,
        RunStatus.REJECTED,
    }
)


def payload_text(payload: Any) -> str:
    """A trigger's payload as its run row keeps it: JSON with its text as written
    ("Żubrówka", not `\\u017bubr\\u00f3wka`), like every other text column, so that
    the person reading the row reads the text and what looks for text in it (a
    forget's scrub, an operator's query) finds it without knowing JSON escapes.
    Rows written before are escaped; the scrub looks for both spellings
    (`memory.forget_places.spellings`). A payload holding a lone surrogate (JSON
    lets `"\\ud800"` through) has no UTF-8 form: it is kept escaped."""
    text = json.dumps(payload, ensure_ascii=False)
    return json.dumps(payload) if unstorable(text) else text


class PayloadTooDeepError(ValueError):
    """A trigger's payload nests deeper than `MAX_PAYLOAD_DEPTH`: refused at the door."""


class PayloadNotJSONError(ValueError):
    """A trigger's payload holds what JSON has no form for (NaN, Infinity, a set, a
    date, a non-string key): refused at the door, before it reaches the run row, the
    broker or a `runs --json` reader that would choke on `NaN`."""


@dataclass(frozen=True, slots=True)
class RunRequest:
    """Everything needed to start a run; what beat, events and the CLI enqueue."""

    key: str
    agent: str
    tenant: str
    user: str = ""
    schedule: str = ""
    goal: str = ""
    trigger_kind: str = "manual"  # cron | heartbeat | event | manual
    trigger_origin: str = "api"  # private | shared | api
    fire_time: datetime | None = None
    payload: dict[str, Any] = field(default_factory=dict)
    time_limit: int = 600
    parent_key: str = ""  # set for a subagent run: the run that spawned it
    subagent: str = ""  # the subagent's name within its parent

    def __post_init__(self) -> None:
        if nesting_depth(self.payload, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH:
            raise PayloadTooDeepError(
                f"payload nests deeper than {MAX_PAYLOAD_DEPTH} levels; nothing was enqueued"
            )
        try:
            json.dumps(self.payload, allow_nan=False)
        except ValueError:  # the only ValueError allow_nan=False raises
            raise PayloadNotJSONError(
                "payload holds NaN or Infinity, which JSON has no form for; nothing was enqueued"
            ) from None
        except TypeError as error:
            raise PayloadNotJSONError(
                f"payload is not plain JSON ({error}); nothing was enqueued"
            ) from None
        # Secrets in an event's payload or a goal are never kept (the run row, the
        # broker's message, the sandbox's trigger.json): the agent gets the marker.
        object.__setattr__(self, "payload", redact_json(self.payload))
        object.__setattr__(self, "goal", redact(self.goal))

    def row(self, now: datetime) -> dict[str, Any]:
        return {
            "key": self.key,
            "agent": self.agent,
            "tenant": self.tenant,
            "user_id": self.user,
            "schedule": self.schedule,
            "goal": self.goal,
            "trigger_kind": self.trigger_kind,
            "trigger_origin": self.trigger_origin,
            "fire_time": self.fire_time,
            "payload": payload_text(self.payload),
            "time_limit": self.time_limit,
            "status": RunStatus.QUEUED.value,
            "enqueued_at": now,
            "parent_key": self.parent_key,
            "subagent": self.subagent,
        }


@dataclass(frozen=True, slots=True)
class Run:
    key: str
    agent: str
    tenant: str
    user: str
    schedule: str
    goal: str
    trigger_kind: str
    trigger_origin: str
    fire_time: datetime | None
    payload: dict[str, Any]
    time_limit: int
    status: RunStatus
    attempts: int
    enqueued_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    sandbox: str
    loaded_ids: list[str]
    candidates: int
    write_handle: str
    summary: str
    error: str
    parent_key: str = ""
    subagent: str = ""
    cancel_requested: bool = False
    tried: str = ""  # the goal attempt: what the run tried, and its evidence
    evidence: str = ""
    lost: int = 0  # attempts that ended with the worker gone (its lease lapsed)
    lease_expires_at: datetime | None = None  # while running: renewed by a live worker

    @classmethod
    def from_row(cls, row: Any) -> Run:
        return cls(
            key=row["key"],
            agent=row["agent"],
            tenant=row["tenant"],
            user=row["user_id"],
            schedule=row["schedule"],
            goal=row["goal"],
            trigger_kind=row["trigger_kind"],
            trigger_origin=row["trigger_origin"],
            fire_time=row["fire_time"],
            payload=json.loads(row["payload"]),
            time_limit=row["time_limit"],
            status=RunStatus(row["status"]),
            attempts=row["attempts"],
            enqueued_at=row["enqueued_at"],
            started_at=row["started_at"],
            finished_at=row["finished_at"],
            sandbox=row["sandbox"],
            loaded_ids=json.loads(row["loaded_ids"]),
            candidates=row["candidates"],
            write_handle=row["write_handle"],
            summary=row["summary"],
            error=row["error"],
            parent_key=row["parent_key"],
            subagent=row["subagent"],
            cancel_requested=bool(row["cancel_requested"]),
            tried=row["tried"],
            evidence=row["evidence"],
            lost=row["lost"],
            lease_expires_at=row["lease_expires_at"],
        )

    def lease_lapsed(self, now: datetime) -> timedelta | None:
        """How long ago the lease of a `running` run ran out: its worker stopped
        (killed, out of memory, its machine gone) and the reaper will send it again.
        None while the lease is live, and for a run that is not running."""
        expires = self.lease_expires_at
        if self.status is not RunStatus.RUNNING or expires is None or expires >= now:
            return None
        return now - expires

    @property
    def duration(self) -> timedelta | None:
        if self.started_at and self.finished_at:
            return self.finished_at - self.started_at
        return None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__slots__:
            value = getattr(self, name)
            out[name] = value.isoformat() if isinstance(value, datetime) else value
        out["duration_ms"] = round(self.duration.total_seconds() * 1000) if self.duration else None
        return out


def create(conn: Connection, requests: Sequence[RunRequest], now: datetime) -> list[str]:
    """Insert run rows; return the keys that are new (the others already existed)."""
    return insert_ignoring_conflicts(conn, runs, [r.row(now) for r in requests], returning="key")


# 1 for a run taken over from a worker whose lease lapsed (it stopped without an
# outcome), 0 for a queued one: the `lost` count that the attempt cap reads.
_LAPSED = case((runs.c.status == RunStatus.RUNNING.value, 1), else_=0)

# The statements every run executes, built once (building them per call costs more
# than executing them); each takes its values as bind parameters.
_CLAIM = (
    update(runs)
    .where(
        runs.c.key == bindparam("run_key"),
        or_(
            runs.c.status == RunStatus.QUEUED.value,
            and_(
                runs.c.status == RunStatus.RUNNING.value,
                runs.c.lease_expires_at < bindparam("now"),
            ),
        ),
    )
    .values(
        status=RunStatus.RUNNING.value,
        lease_owner=bindparam("owner"),
        lease_expires_at=bindparam("expires"),
        attempts=runs.c.attempts + 1,
        lost=runs.c.lost + _LAPSED,
        started_at=bindparam("now"),
        sandbox=bindparam("box"),
    )
    .returning(*runs.c)  # one round trip (PostgreSQL; SQLite ≥ 3.35)
)
_HELD = (
    runs.c.key == bindparam("run_key"),
    runs.c.lease_owner == bindparam("owner"),
    runs.c.status == RunStatus.RUNNING.value,
)
_FINISH = (
    update(runs)
    .where(*_HELD)
    .values(
        status=bindparam("new_status"),
        finished_at=bindparam("now"),
        lease_expires_at=None,
        candidates=bindparam("n_candidates"),
        write_handle=bindparam("handle"),
        summary=bindparam("summary_text"),
        error=bindparam("error_text"),
        tried=bindparam("tried_text"),
        evidence=bindparam("evidence_text"),
        loaded_ids=func.coalesce(bindparam("loaded", type_=Text), runs.c.loaded_ids),
    )
)


def claim(
    conn: Connection, key: str, owner: str, now: datetime, lease: timedelta, *, sandbox: str = ""
) -> Run | None:
    """Take the run if it is queued or its lease lapsed; None if someone else has it.

    `sandbox` is the path the run's sandbox will have: recorded with the claim, before
    the directory exists, so the sweep never mistakes a live sandbox for an orphan.
    """
    row = (
        conn.execute(
            _CLAIM,
            {"run_key": key, "now": now, "owner": owner, "expires": now + lease, "box": sandbox},
        )
        .mappings()
        .first()
    )
    return Run.from_row(row) if row else None


def renew(conn: Connection, key: str, owner: str, now: datetime, lease: timedelta) -> bool:
    """Extend our lease; False means we lost it (the reaper gave the run to another)."""
    result = conn.execute(
        update(runs)
        .where(
            runs.c.key == key, runs.c.lease_owner == owner, runs.c.status == RunStatus.RUNNING.value
        )
        .values(lease_expires_at=now + lease)
    )
    return result.rowcount == 1


def record_given(conn: Connection, key: str, owner: str, memory_ids: Sequence[str]) -> bool:
    """Record the ids of the memories the run was given, only if we still hold the run.

    `finish` records them too; a run that votes records them first, before its votes
    leave for the writer, because the writer counts a vote only for a memory in this
    record (`given`)."""
    result = conn.execute(
        update(runs)
        .where(
            runs.c.key == key, runs.c.lease_owner == owner, runs.c.status == RunStatus.RUNNING.value
        )
        .values(loaded_ids=json.dumps(list(memory_ids)))
    )
    return result.rowcount == 1


def given(conn: Connection, keys: Iterable[str]) -> dict[str, tuple[str, list[str]]]:
    """`run key → (tenant, ids of the memories it was given)` for those of `keys` that
    have a record: what the writer checks a run's votes against."""
    wanted = sorted(set(keys))
    if not wanted:
        return {}
    query = select(runs.c.key, runs.c.tenant, runs.c.loaded_ids).where(runs.c.key.in_(wanted))
    return {key: (tenant, json.loads(ids)) for key, tenant, ids in conn.execute(query)}


def user_of(conn: Connection, key: str) -> str | None:
    """The person run `key` acts for ("" for none), or None when it has no record:
    what the memory writer tells the gate, rather than what the run's candidates say."""
    found: str | None = conn.execute(
        select(runs.c.user_id).where(runs.c.key == key)
    ).scalar_one_or_none()
    return found


def finish(
    conn: Connection,
    key: str,
    owner: str,
    now: datetime,
    *,
    status: RunStatus,
    candidates: int = 0,
    write_handle: str = "",
    summary: str = "",
    error: str = "",
    loaded_ids: Sequence[str] | None = None,
    tried: str = "",
    evidence: str = "",
) -> bool:
    """Record the outcome, the goal attempt (what was tried, the evidence) and what the
    run was given, only if we still hold the run.

    The texts come from the agent; what no backend can keep in them (a NUL, a lone
    surrogate) is written as its escape (`memory.storable.made_storable`): refused
    by the database, they would fail this update and leave the run `running`."""
    result = conn.execute(
        _FINISH,
        {
            "run_key": key,
            "owner": owner,
            "now": now,
            "new_status": status.value,
            "n_candidates": candidates,
            "handle": write_handle,
            "summary_text": made_storable(summary)[:2000],
            "error_text": made_storable(error)[:4000],
            "tried_text": made_storable(tried)[:2000],
            "evidence_text": made_storable(evidence)[:2000],
            "loaded": None if loaded_ids is None else json.dumps(list(loaded_ids)),
        },
    )
    return result.rowcount == 1


def release(conn: Connection, key: str, owner: str, now: datetime) -> bool:
    """Give a run we hold back to the queue (a transient failure); it runs again later."""
    result = conn.execute(
        update(runs)
        .where(
            runs.c.key == key, runs.c.lease_owner == owner, runs.c.status == RunStatus.RUNNING.value
        )
        .values(
            status=RunStatus.QUEUED.value, lease_owner="", lease_expires_at=None, enqueued_at=now
        )
    )
    return result.rowcount == 1


def prune(conn: Connection, enqueued_before: datetime, *, limit: int = 1000) -> int:
    """Delete up to `limit` finished runs enqueued before `enqueued_before`, oldest first.

    Walks the enqueue-time index, so a pass costs the batch, not the table; bounded
    so no pass holds a long transaction (the reaper drains a backlog a batch per
    pass). Runs not finished yet are left alone, however old.
    """
    oldest = (
        select(runs.c.key)
        .where(
            runs.c.enqueued_at < enqueued_before,
            runs.c.status.in_([s.value for s in FINISHED]),
        )
        .order_by(runs.c.enqueued_at)
        .limit(limit)
    )
    return conn.execute(delete(runs).where(runs.c.key.in_(oldest.scalar_subquery()))).rowcount


def get(conn: Connection, key: str) -> Run | None:
    row = conn.execute(select(runs).where(runs.c.key == key)).mappings().first()
    return Run.from_row(row) if row else None


def needing_delivery(
    conn: Connection, now: datetime, requeue_after: timedelta, limit: int = 500
) -> list[str]:
    """Runs whose lease lapsed, and queued runs nobody picked up for too long."""
    query = (
        select(runs.c.key)
        .where(_needs_delivery(now, requeue_after))
        .order_by(runs.c.enqueued_at)
        .limit(limit)
    )
    return list(conn.execute(query).scalars())


def requeue(
    conn: Connection, keys: Sequence[str], now: datetime, requeue_after: timedelta
) -> list[str]:
    """Put lapsed or forgotten runs back to `queued`; return the keys this call moved.

    The condition is re-checked in the UPDATE, so two reapers never both resend.
    """
    moved = []
    for key in keys:
        result = conn.execute(
            update(runs)
            .where(runs.c.key == key, _needs_delivery(now, requeue_after))
            .values(
                status=RunStatus.QUEUED.value,
                lease_owner="",
                lease_expires_at=None,
                enqueued_at=now,
                lost=runs.c.lost + _LAPSED,
            )
        )
        if result.rowcount == 1:
            moved.append(key)
    return moved


def give_up(conn: Connection, now: datetime, max_attempts: int) -> list[str]:
    """Fail the runs whose worker has now stopped `max_attempts` times without an
    outcome (this attempt's lease lapsed; `lost` counts the earlier ones); return
    their keys.

    A lapsed lease means the worker stopped without recording anything: it was
    killed, ran out of memory, or the agent crashed the process (`os._exit`, a
    fault in native code). A run that does that every time would otherwise be
    re-sent by the reaper forever, taking a worker down each time. Its record
    says why it stopped, and the scope's next run sees the failed attempt. Attempts
    that ended otherwise (a transient failure gave the run back to the queue) do not
    count towards the cap.
    """
    error = (
        f"given up after its worker stopped {max_attempts} times without recording an"
        " outcome (killed, out of memory, or the agent ended the process); trigger it"
        " again to retry (NIGHTSHIFT_RUN_MAX_ATTEMPTS)"
    )
    result = conn.execute(
        update(runs)
        .where(
            runs.c.status == RunStatus.RUNNING.value,
            runs.c.lease_expires_at < now,
            runs.c.lost + 1 >= max_attempts,
        )
        .values(
            status=RunStatus.FAILED.value,
            lost=runs.c.lost + 1,
            finished_at=now,
            lease_expires_at=None,
            error=error,
            tried=error,
        )
        .returning(runs.c.key)
    )
    return list(result.scalars())


def _needs_delivery(now: datetime, requeue_after: timedelta) -> Any:
    return or_(
        and_(runs.c.status == RunStatus.RUNNING.value, runs.c.lease_expires_at < now),
        and_(runs.c.status == RunStatus.QUEUED.value, runs.c.enqueued_at < now - requeue_after),
    )


def recent(
    conn: Connection,
    *,
    limit: int = 20,
    agent: str = "",
    schedule: str = "",
    status: str = "",
    since: datetime | None = None,
) -> list[Run]:
    query = select(runs).order_by(runs.c.enqueued_at.desc(), runs.c.key).limit(limit)
    if status:
        query = query.where(runs.c.status == status)
    if agent:
        query = query.where(runs.c.agent == agent)
    if schedule:
        query = query.where(runs.c.schedule == schedule)
    if since is not None:
        query = query.where(runs.c.finished_at >= since)
    return [Run.from_row(r) for r in conn.execute(query).mappings()]


def running_sandboxes(conn: Connection, now: datetime) -> set[str]:
    query = select(runs.c.sandbox).where(
        runs.c.status == RunStatus.RUNNING.value, runs.c.lease_expires_at >= now
    )
    return {s for s in conn.execute(query).scalars() if s}


def children(conn: Connection, parent_key: str) -> list[Run]:
    """The subagent runs `parent_key` spawned, oldest first."""
    query = (
        select(runs).where(runs.c.parent_key == parent_key).order_by(runs.c.enqueued_at, runs.c.key)
    )
    return [Run.from_row(r) for r in conn.execute(query).mappings()]


def request_cancel(conn: Connection, key: str, now: datetime) -> RunStatus | None:
    """Cancel run `key`: a queued run ends at once, a running one is asked to stop.

    Returns the run's status after the call (None if there is no such run). A run
    asked to stop finishes as `cancelled` whatever its agent returns, so a parent's
    cancel is never lost to a race with its child finishing.
    """
    conn.execute(
        update(runs)
        .where(runs.c.key == key, runs.c.status == RunStatus.QUEUED.value)
        .values(
            status=RunStatus.CANCELLED.value, finished_at=now, error="cancelled before it started"
        )
    )
    conn.execute(
        update(runs)
        .where(runs.c.key == key, runs.c.status == RunStatus.RUNNING.value)
        .values(cancel_requested=True)
    )
    found = get(conn, key)
    return found.status if found else None


def cancel_requested(conn: Connection, key: str) -> bool:
    query = select(runs.c.cancel_requested).where(runs.c.key == key)
    return bool(conn.execute(query).scalar())
