"""A scope's goal attempts: the latest finished runs of one agent for one user.

Each run appends its attempt by finishing its own row (`runs.finish` records the
status, what it tried and its evidence), so an attempt costs no write beyond the
one every run makes, and a run that remembers nothing sends the writer nothing.
The next run reads them here, newest first, to avoid repeating a failed try.
"""

from __future__ import annotations

from sqlalchemy import Connection, Integer, bindparam, select

from memory.goals import Attempt, clip
from memory.records import Scope
from workers.tables import runs

LATEST = 5

_LATEST_ATTEMPTS = (
    select(runs.c.key, runs.c.status, runs.c.tried, runs.c.evidence, runs.c.finished_at)
    .where(
        runs.c.tenant == bindparam("tenant"),
        runs.c.user_id == bindparam("user_id"),
        runs.c.agent == bindparam("agent"),
        runs.c.finished_at.is_not(None),
    )
    .order_by(runs.c.finished_at.desc(), runs.c.key.desc())
    .limit(bindparam("limit", type_=Integer, literal_execute=True))
)


def latest(conn: Connection, scope: Scope, *, limit: int = LATEST) -> tuple[Attempt, ...]:
    """Up to `limit` attempts in `scope` (its tenant, user and agent), newest first."""
    rows = conn.execute(
        _LATEST_ATTEMPTS,
        {"tenant": scope.tenant, "user_id": scope.user, "agent": scope.agent, "limit": limit},
    )
    return tuple(
        Attempt(run_key=key, outcome=status, tried=clip(tried), evidence=clip(evidence), at=at)
        for key, status, tried, evidence, at in rows
    )
