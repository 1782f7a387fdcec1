"""The applied schedules in the database: apply files, list, pause, resume, and the
progress beat keeps beside each one (latest fire handled, runs started, buffered fire).

`apply` makes the database match a set of definitions (create, update, delete)
and bumps a global revision on every changed row, which is how a running beat
notices edits within seconds without a restart.
"""

from __future__ import annotations

import enum
import gc
import json
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Connection, bindparam, case, func, insert, select, update

from schedules.definition import Schedule
from schedules.tables import as_utc, schedules


class ScheduleNotFoundError(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no schedule named {name!r} (see `nightshift schedules list`)")


class Action(enum.StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class Change:
    name: str
    action: Action
    source: str = ""
    before: dict[str, Any] | None = None  # an update: the definition it replaces (`to_json`)


APPLIED_COLUMNS = (
    schedules.c.definition,
    schedules.c.paused,
    schedules.c.pause_note,
    schedules.c.revision,
    schedules.c.last_fire_at,
    schedules.c.runs_fired,
    schedules.c.deleted,
    schedules.c.updated_at,
    schedules.c.pending_fire_at,
)
"""What `AppliedSchedule.from_row` reads: not the fingerprint, kind or name (the
definition holds them), so a load of every schedule moves less."""


@dataclass(frozen=True, slots=True)
class AppliedSchedule:
    """A schedule as the database holds it, with the state beat keeps beside it."""

    schedule: Schedule
    paused: bool
    pause_note: str
    revision: int
    last_fire_at: datetime | None
    runs_fired: int
    deleted: bool
    updated_at: datetime | None = None
    pending_fire_at: datetime | None = None

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> AppliedSchedule:
        """From a row of `APPLIED_COLUMNS`, in that order."""
        definition, paused, note, revision, last_fire, fired, deleted, updated, pending = row
        return cls(
            schedule=Schedule.from_stored(load_definition(definition)),
            paused=bool(paused),
            pause_note=note,
            revision=revision,
            last_fire_at=as_utc(last_fire),
            runs_fired=fired,
            deleted=bool(deleted),
            updated_at=as_utc(updated),
            pending_fire_at=as_utc(pending),
        )

    @property
    def name(self) -> str:
        return self.schedule.name


def load_definition(text: str) -> Any:
    """`json.loads(text)` of a stored definition, in about a third of the time.

    orjson reads JSON to the same values as `json` but for two cases: an integer
    beyond 64 bits becomes a float, and an escaped lone surrogate is refused. The
    first can only be in the payload (every other number is a small setting), so a
    payload holding any float is read again by `json`, as is text orjson refuses.
    """
    try:
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)
    if not isinstance(data, dict) or (data.get("payload") and _holds_float(data["payload"])):
        return json.loads(text)
    return data


def _holds_float(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


@contextmanager
def collector_paused() -> Iterator[None]:
    """Hold the cyclic garbage collector while tens of thousands of records are built.

    They hold no cycles, but each allocation counts towards a collection, and every
    older-generation collection walks all the records built so far: about a fifth
    of the load at 50,000 schedules. Whatever is garbage meanwhile waits for the
    next collection after the block."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def plan(conn: Connection, wanted: Sequence[Schedule], *, prune: bool = True) -> list[Change]:
    """What `apply` would do, without doing it."""
    return _plan(conn, wanted, {s.name: s.fingerprint() for s in wanted}, prune=prune)


def _plan(
    conn: Connection, wanted: Sequence[Schedule], fingerprints: dict[str, str], *, prune: bool
) -> list[Change]:
    current = {
        r.name: r.fingerprint
        for r in conn.execute(
            select(schedules.c.name, schedules.c.fingerprint).where(schedules.c.deleted.is_(False))
        )
    }
    changes = []
    for s in wanted:
        if s.name not in current:
            changes.append(Change(s.name, Action.CREATE, s.source))
        elif current[s.name] != fingerprints[s.name]:
            changes.append(Change(s.name, Action.UPDATE, s.source))
        else:
            changes.append(Change(s.name, Action.UNCHANGED, s.source))
    updated = _stored_definitions(conn, [c.name for c in changes if c.action is Action.UPDATE])
    if updated:
        changes = [replace(c, before=updated[c.name]) if c.name in updated else c for c in changes]
    if prune:
        names = {s.name for s in wanted}
        changes += [Change(n, Action.DELETE) for n in sorted(current) if n not in names]
    return changes


def apply(
    conn: Connection, wanted: Sequence[Schedule], now: datetime, *, prune: bool = True
) -> list[Change]:
    """Make the database match `wanted`; return the changes (unchanged ones included).

    A schedule's pause follows whichever changed last: its file's `paused` and
    `pause_note`, or `schedules pause`/`resume`. So an edit that leaves the
    file's pause settings as they were keeps a pause (or resume) made from the
    command line; an edit of `paused` or `pause_note` in the file replaces it.

    One executemany per kind of change: 50,000 new schedules are one statement
    (executed in the driver's batches), not 50,000."""
    revision = _next_revision(conn)  # first: the plan reads what earlier writers committed
    fingerprints = {s.name: s.fingerprint() for s in wanted}
    changes = _plan(conn, wanted, fingerprints, prune=prune)
    by_name = {s.name: s for s in wanted}
    # A deleted row keeps its name: defining it again updates that row.
    existing = set(conn.execute(select(schedules.c.name)).scalars())
    # What the stored definition said about pausing, as its file had it when applied.
    said = {
        c.name: (bool(c.before.get("paused", False)), str(c.before.get("pause_note", "")))
        for c in changes
        if c.before is not None
    }
    deleted: list[dict[str, object]] = []
    inserted: list[dict[str, object]] = []
    updated: list[dict[str, object]] = []
    edited: list[dict[str, object]] = []  # the file's pause as it was: the column's stays
    revived: list[dict[str, object]] = []  # defined again after a delete: starts afresh
    for change in changes:
        if change.action is Action.DELETE:
            deleted.append({"b_name": change.name})
        elif change.action is not Action.UNCHANGED:
            s = by_name[change.name]
            row: dict[str, object] = {
                "b_name": change.name,
                "definition": json.dumps(s.to_json()),
                "fingerprint": fingerprints[change.name],
                "kind": s.kind,
            }
            if said.get(change.name) == (s.paused, s.pause_note):
                edited.append(row)
                continue
            row |= {"paused": s.paused, "pause_note": s.pause_note}
            if change.name not in existing:
                inserted.append(row)
            else:
                (revived if change.action is Action.CREATE else updated).append(row)
    by_name_param = schedules.c.name == bindparam("b_name")
    stamp = {"revision": revision, "updated_at": now}
    if deleted:
        conn.execute(update(schedules).where(by_name_param).values(deleted=True, **stamp), deleted)
    columns = ("definition", "fingerprint", "kind", "paused", "pause_note")
    fresh = {"last_fire_at": None, "runs_fired": 0, "pending_fire_at": None}
    for rows, written, more in (
        (edited, columns[:3], {}),
        (updated, columns, {}),
        (revived, columns, fresh),  # the old schedule's runs do not count against max_runs
    ):
        if rows:
            conn.execute(
                update(schedules)
                .where(by_name_param)
                .values(**{c: bindparam(c) for c in written}, deleted=False, **stamp, **more),
                rows,
            )
    if inserted:
        conn.execute(
            insert(schedules).values(
                name=bindparam("b_name"),
                **{c: bindparam(c) for c in columns},
                deleted=False,
                **stamp,
            ),
            inserted,
        )
    return changes


def _stored_definitions(conn: Connection, names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The stored definitions of `names` (`Schedule.to_json` as last applied): what
    an update replaces, for its diff and for its pause (`apply`)."""
    stored: dict[str, dict[str, Any]] = {}
    for start in range(0, len(names), 500):
        query = select(schedules.c.name, schedules.c.definition).where(
            schedules.c.name.in_(names[start : start + 500])
        )
        for name, text in conn.execute(query):
            stored[name] = load_definition(text)
    return stored


def all_schedules(
    conn: Connection,
    *,
    include_deleted: bool = False,
    name_glob: str | None = None,
    limit: int | None = None,
    in_name_order: bool = True,
) -> list[AppliedSchedule]:
    """Applied schedules in name order; `name_glob` keeps names matching a shell-style
    pattern (`*` any run of characters, `?` one; case-insensitive on both dialects),
    `limit` keeps the first so many. Both are applied in the query. The beat, which
    heaps them, passes `in_name_order=False`: sorting 50,000 names is a fifth of the
    query."""
    query = select(*APPLIED_COLUMNS)
    if in_name_order:
        query = query.order_by(schedules.c.name)
    if not include_deleted:
        query = query.where(schedules.c.deleted.is_(False))
    if name_glob is not None:
        query = query.where(func.lower(schedules.c.name).like(glob_to_like(name_glob), escape="\\"))
    if limit is not None:
        query = query.limit(limit)
    with collector_paused():
        return [AppliedSchedule.from_row(r) for r in conn.execute(query)]


def glob_to_like(glob: str) -> str:
    """`"Digest-*"` -> `"digest-%"`: a lower-cased LIKE pattern, `%`, `_` and `\\` escaped."""
    escaped = glob.lower().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped.replace("*", "%").replace("?", "_")


def changed_since(conn: Connection, revision: int) -> list[AppliedSchedule]:
    query = select(*APPLIED_COLUMNS).where(schedules.c.revision > revision)
    with collector_paused():
        return [AppliedSchedule.from_row(r) for r in conn.execute(query)]


def get(conn: Connection, name: str) -> AppliedSchedule:
    row = conn.execute(
        select(*APPLIED_COLUMNS).where(schedules.c.name == name, schedules.c.deleted.is_(False))
    ).first()
    if row is None:
        raise ScheduleNotFoundError(name)
    return AppliedSchedule.from_row(row)


def set_paused(conn: Connection, name: str, paused: bool, note: str, now: datetime) -> None:
    revision = _next_revision(conn)
    get(conn, name)
    conn.execute(
        update(schedules)
        .where(schedules.c.name == name)
        .values(paused=paused, pause_note=note, revision=revision, updated_at=now)
    )


@dataclass(frozen=True, slots=True)
class Progress:
    """What one beat tick (or a backfill) changed for one schedule."""

    name: str
    last_fire_at: datetime | None = None  # None: unchanged
    runs_added: int = 0
    pending: datetime | None = None
    set_pending: bool = False  # write `pending` (None clears it)


def record_progress(conn: Connection, progress: Iterable[Progress]) -> None:
    """Remember where beat got to, so a restarted or new leader continues from there.

    One executemany per kind of change: a burst of thousands of fires costs two
    statements, not thousands."""
    fired, pending = [], []
    for p in progress:
        if p.last_fire_at is not None or p.runs_added:
            fired.append({"b_name": p.name, "b_last": p.last_fire_at, "b_added": p.runs_added})
        if p.set_pending:
            pending.append({"b_name": p.name, "b_pending": p.pending})
    if fired:
        last = bindparam("b_last", type_=schedules.c.last_fire_at.type)
        conn.execute(
            update(schedules)
            .where(schedules.c.name == bindparam("b_name"))
            .values(
                last_fire_at=case(  # never moves back; NULL leaves it as it is
                    (last.is_(None), schedules.c.last_fire_at),
                    (schedules.c.last_fire_at > last, schedules.c.last_fire_at),
                    else_=last,
                ),
                runs_fired=schedules.c.runs_fired + bindparam("b_added"),
            ),
            fired,
        )
    if pending:
        conn.execute(
            update(schedules)
            .where(schedules.c.name == bindparam("b_name"))
            .values(pending_fire_at=bindparam("b_pending")),
            pending,
        )


def set_pending(conn: Connection, name: str, pending: datetime | None) -> None:
    """Buffer a fire from outside beat (backfill); the revision bump makes beat reload it."""
    conn.execute(
        update(schedules)
        .where(schedules.c.name == name)
        .values(pending_fire_at=pending, revision=_next_revision(conn))
    )


def max_revision(conn: Connection) -> int:
    return int(conn.execute(select(func.coalesce(func.max(schedules.c.revision), 0))).scalar_one())


REVISION_LOCK = 0x6E735F7265760001
"""The PostgreSQL advisory lock key that orders revisions (`_next_revision`)."""


def _next_revision(conn: Connection) -> int:
    """The revision for the rows this transaction changes: one more than any committed.

    The beat reloads rows whose revision is above the highest it has seen, so
    revisions must become visible in the order they are numbered: a change
    committed after the beat's read must have a higher number than anything
    the beat saw. On PostgreSQL (READ COMMITTED) two transactions each reading
    max + 1 could take the same number, and a sequence would not help either:
    a transaction holding number 7 may commit after one holding 8 was read. So
    the number is taken under a transaction-scoped advisory lock, released only
    at commit or rollback: a second writer waits, and its `max` (a new statement,
    a new snapshot) sees the first one's commit. Catalog writes are few and short
    (apply, pause, resume, a backfill's buffered fire); SQLite allows one writer
    at a time anyway. Rows are never deleted (`deleted` marks them), so `max` only
    grows.
    """
    if conn.dialect.name == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(REVISION_LOCK)))
    return max_revision(conn) + 1
