"""The leader lease: one row per beat group, so only one beat fires at a time.

A beat holds the lease for `ttl` and renews it well before it runs out; a standby
tries to take it on every poll and succeeds only once it has expired. Taking and
renewing are one conditional UPDATE each, so two beats racing for an expired
lease cannot both win (PostgreSQL re-checks the WHERE after the row lock; SQLite
writes are serialised by `BEGIN IMMEDIATE`). `term` grows by one on every change
of holder, which is how a beat notices it lost the lease and got it back.

A standby also keeps a row of its own live beside the lease (`stand_by`, named
`STANDBY` and a digest of its holder), which it renews on each poll and drops when
it leads or stops: `nightshift status` names the beats ready to take over
(`standbys`), and a standby that died drops out of that list within `ttl`.

The lease compares the beats' own clocks: keep them in sync (NTP), with skew well
under `ttl`. Run keys stay unique in any case, so a brief overlap of two leaders
can make a fire be decided twice but never start a run twice.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, and_, case, delete, insert, or_, select, update
from sqlalchemy.exc import IntegrityError

from schedules.tables import as_utc, leases

BEAT_LEASE = "beat"
STANDBY = "beat.standby."
"""The name prefix of the rows that standby beats keep live (`stand_by`)."""
STANDBY_KEPT = timedelta(days=1)
"""How long the row of a standby that stopped without a word is kept, lapsed."""


@dataclass(frozen=True, slots=True)
class Lease:
    name: str
    holder: str
    term: int
    acquired_at: datetime
    expires_at: datetime

    def live(self, now: datetime) -> bool:
        return now < self.expires_at


def acquire(
    conn: Connection, holder: str, now: datetime, ttl: timedelta, *, name: str = BEAT_LEASE
) -> Lease | None:
    """Take the lease if it is free or expired, or renew it if `holder` has it.

    Returns the lease now held by `holder`, or None when another holder's lease
    is still live.
    """
    mine = leases.c.holder == holder
    result = conn.execute(
        update(leases)
        .where(leases.c.name == name, or_(mine, leases.c.expires_at <= now))
        .values(
            holder=holder,
            term=case((mine, leases.c.term), else_=leases.c.term + 1),
            acquired_at=case((mine, leases.c.acquired_at), else_=now),
            expires_at=now + ttl,
        )
    )
    if result.rowcount == 0:
        if current(conn, name=name) is not None:
            return None
        try:
            with conn.begin_nested():
                conn.execute(
                    insert(leases).values(
                        name=name, holder=holder, term=1, acquired_at=now, expires_at=now + ttl
                    )
                )
        except IntegrityError:  # another beat created it first
            return None
    lease = current(conn, name=name)
    return lease if lease is not None and lease.holder == holder else None


def release(conn: Connection, holder: str, now: datetime, *, name: str = BEAT_LEASE) -> bool:
    """Give the lease up now (on a clean shutdown), so a standby need not wait."""
    result = conn.execute(
        update(leases)
        .where(and_(leases.c.name == name, leases.c.holder == holder))
        .values(expires_at=now)
    )
    return result.rowcount == 1


def current(conn: Connection, *, name: str = BEAT_LEASE) -> Lease | None:
    row = conn.execute(select(leases).where(leases.c.name == name)).first()
    return None if row is None else _lease(row)


def _lease(row: Any) -> Lease:
    return Lease(
        name=row.name,
        holder=row.holder,
        term=row.term,
        acquired_at=as_utc(row.acquired_at),  # type: ignore[arg-type]
        expires_at=as_utc(row.expires_at),  # type: ignore[arg-type]
    )


def stand_by(conn: Connection, holder: str, now: datetime, ttl: timedelta) -> None:
    """Say that `holder` stands by, ready to lead, until `now + ttl`; a standby says
    so on each poll. Its first word also clears lapsed rows of standbys long gone."""
    name = _standby_name(holder)
    renewed = conn.execute(update(leases).where(leases.c.name == name).values(expires_at=now + ttl))
    if renewed.rowcount:
        return
    conn.execute(
        delete(leases).where(
            leases.c.name.startswith(STANDBY, autoescape=True),
            leases.c.expires_at < now - STANDBY_KEPT,
        )
    )
    try:
        with conn.begin_nested():
            conn.execute(
                insert(leases).values(
                    name=name, holder=holder, term=0, acquired_at=now, expires_at=now + ttl
                )
            )
    except IntegrityError:  # the same holder said so twice at once: one row is enough
        pass


def leave_standby(conn: Connection, holder: str) -> None:
    """`holder` no longer stands by: it leads, or it stops."""
    conn.execute(delete(leases).where(leases.c.name == _standby_name(holder)))


def standbys(conn: Connection, now: datetime) -> list[Lease]:
    """The beats standing by now, longest standing first (`acquired_at`: since when)."""
    query = (
        select(leases)
        .where(leases.c.name.startswith(STANDBY, autoescape=True), leases.c.expires_at > now)
        .order_by(leases.c.acquired_at, leases.c.holder)
    )
    return [_lease(row) for row in conn.execute(query)]


def _standby_name(holder: str) -> str:
    """A holder's standby row: a digest, since a holder may be longer than a name."""
    return STANDBY + hashlib.sha256(holder.encode()).hexdigest()[:32]
