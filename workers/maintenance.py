"""Maintenance jobs on the `maintenance` queue: consolidate, expire, decay, purge.

Expire and decay are set-based UPDATEs, run a primary-key range at a time with a
transaction per range (`memory.id_ranges`): one pass over the table, however many
tenants, and never one long transaction; consolidate plans all tenants from one
snapshot and applies a tenant per transaction; purge deletes a tenant at a time
through the forgetting path. The same functions back the Celery tasks (beat sends them at configurable
cadences) and `nightshift maintain …`. Votes go the other way, through the
memory writer's queue (the tenant's shard), in batches: `nightshift.votes`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from celery import Task, shared_task
from sqlalchemy import Engine, and_, func, select

from memory import consolidation, expiry, reinforcement
from memory.engine import retrying
from memory.expiry import TtlConfig
from memory.forgetting import TextPlace, compact_fulltext, delete_where
from memory.id_ranges import in_id_ranges
from memory.reinforcement import Vote
from memory.tables import memories
from memory.vote_rights import VoteRights
from workers import runs as run_records
from workers.runtime import runtime_of
from workers.tables import runs

log = logging.getLogger(__name__)

JOBS = ("consolidate", "expire", "decay", "purge")
TASK_PREFIX = "nightshift.maintain."
VOTES_TASK = "nightshift.votes"

Progress = Callable[[str], None]
DEFAULT_TTL = TtlConfig()
RUN_TEXT = TextPlace(
    "runs",
    runs,
    key="key",
    tenant="tenant",
    columns=("summary", "payload", "error", "tried", "evidence"),
)
"""A run's record can quote the memory it was given; a forget scrubs it there too."""
FORGET_PLACES = (RUN_TEXT,)


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class JobSummary:
    job: str
    dry_run: bool
    tenants: int
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)
    per_tenant: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def tenants(engine: Engine, only: str | None = None) -> list[str]:
    if only:
        return [only]
    with engine.connect() as conn:
        return list(
            conn.execute(select(memories.c.tenant).distinct().order_by(memories.c.tenant)).scalars()
        )


def run_job(
    engine: Engine,
    job: str,
    *,
    now: datetime,
    ttl: TtlConfig = DEFAULT_TTL,
    purge_after: timedelta = timedelta(days=30),
    tenant: str | None = None,
    dry_run: bool = False,
    progress: Progress = lambda tenant: None,
) -> JobSummary:
    """Run `job` for one tenant or all of them.

    Expire and decay are a set-based UPDATE per primary-key range (a single pass
    over the table, whatever the number of tenants); consolidate plans every
    tenant from one snapshot and applies tenant by tenant; purge deletes tenant by
    tenant through the forgetting path, with a tombstone each.
    """
    if job not in JOBS:
        raise ValueError(f"unknown maintenance job {job!r}; one of {', '.join(JOBS)}")
    started = time.monotonic()
    per: dict[str, dict[str, Any]]
    if job == "consolidate":
        results, hot_summaries = consolidation.consolidate(
            engine, tenant, now, dry_run=dry_run, progress=progress
        )
        per = {
            p.tenant: r.to_json() if r else {**p.counts(), "plan": p.to_json()} for p, r in results
        }
        per["*"] = {"hot_summaries": hot_summaries}
    elif job == "expire":
        n = in_id_ranges(
            engine,
            lambda c, among: expiry.expire(
                c, now, ttl, tenant=tenant, dry_run=dry_run, among=among
            ),
        )
        per = {tenant or "*": {"expired": n}}
    elif job == "decay":
        n = in_id_ranges(
            engine,
            lambda c, among: reinforcement.decay(
                c, now, tenant=tenant, dry_run=dry_run, among=among
            ),
        )
        per = {tenant or "*": {"decayed": n}}
    else:
        per = {}
        for name in _purgeable_tenants(engine, now, purge_after, tenant):
            per[name] = _purge(engine, name, now, purge_after, dry_run)
            progress(name)
        if per and not dry_run:
            compact_fulltext(engine)  # once for the pass, not once per tenant
    counts: dict[str, int] = {}
    for result in per.values():
        for key, value in result.items():
            if isinstance(value, int) and not isinstance(value, bool):
                counts[key] = counts.get(key, 0) + value
    tenants_done = len([t for t in per if t != "*"])
    if job in ("expire", "decay"):
        tenants_done = len(tenants(engine, tenant))
    summary = JobSummary(
        job, dry_run, tenants_done, round(time.monotonic() - started, 3), counts, per
    )
    log.info("maintenance %s done", job, extra={"action": f"maintain.{job}", **counts})
    return summary


def _purgeable_tenants(
    engine: Engine, now: datetime, purge_after: timedelta, tenant: str | None
) -> list[str]:
    where = expiry.purgeable_clause(now, purge_after)
    if tenant is not None:
        where = and_(where, memories.c.tenant == tenant)
    with engine.connect() as conn:
        query = select(memories.c.tenant).where(where).distinct().order_by(memories.c.tenant)
        return list(conn.execute(query).scalars())


def _purge(
    engine: Engine, tenant: str, now: datetime, purge_after: timedelta, dry_run: bool
) -> dict[str, Any]:
    where = expiry.purgeable_clause(now, purge_after)
    if dry_run:
        with engine.connect() as conn:
            n = conn.execute(
                select(func.count()).where(memories.c.tenant == tenant, where)
            ).scalar_one()
        return {"purgeable": int(n)}
    purged = delete_where(
        engine,
        tenant,
        where,
        now=now,
        reason=f"expired more than {purge_after.days} days ago",
        compact=False,
    )
    return {k: v for k, v in purged.to_json().items() if k != "selector"}


def apply_vote_batch(
    engine: Engine, handle: str, votes: Sequence[Vote], now: datetime, *, operator_for: str = ""
) -> reinforcement.VoteReport:
    """One transaction per batch; a redelivered batch (same handle) changes nothing.

    Whose votes count for what (`memory.vote_rights`): with `operator_for`, the votes
    are the operator's, on any memory of that tenant (`nightshift memory vote`);
    otherwise each vote counts only through the record of the run it names
    (`Vote.run_id`): for the memories that run was given, in its tenant. Refused
    votes are in the report (and the audit trail), and logged without content.
    """

    @retrying()
    def work() -> reinforcement.VoteReport:
        with engine.begin() as conn:
            if operator_for:
                rights = {"": VoteRights.of_operator(operator_for)}
            else:
                records = run_records.given(conn, (v.run_id for v in votes if v.run_id))
                rights = {key: VoteRights.of_run(*record) for key, record in records.items()}
            return reinforcement.apply_votes(conn, votes, now, rights=rights, handle=handle)

    report = work()
    if report.refused:
        log.warning(
            "refused %d of a batch's votes",
            len(report.refused),
            extra={
                "action": "votes.refused",
                "handle": handle,
                "refused": [r.to_json() for r in report.refused],
            },
        )
    return report


@contextmanager
def one_pass_at_a_time(engine: Engine, job: str) -> Iterator[bool]:
    """True while this process holds `job`'s pass lock; False if another pass of `job`
    runs now (anywhere, on PostgreSQL: a session advisory lock, released when the
    block ends or the holder's connection dies). SQLite serves one machine and
    serialises writers itself: always True."""
    if engine.dialect.name != "postgresql":
        yield True
        return
    with engine.connect() as conn:
        key = {"key": f"nightshift.maintain.{job}"}
        held = conn.exec_driver_sql(
            "SELECT pg_try_advisory_lock(hashtext(%(key)s))", key
        ).scalar_one()
        conn.commit()  # hold the lock, not a transaction
        try:
            yield bool(held)
        finally:
            if held:
                conn.exec_driver_sql("SELECT pg_advisory_unlock(hashtext(%(key)s))", key)
                conn.commit()


def _task(job: str) -> Any:
    @shared_task(bind=True, name=TASK_PREFIX + job, acks_late=True)
    def maintain(self: Task, tenant: str | None = None, dry_run: bool = False) -> dict[str, Any]:
        rt = runtime_of(self.app)
        settings = rt.settings
        with one_pass_at_a_time(rt.engine, job) as alone:
            if not alone:
                # A pass longer than its cadence: the next one has nothing to add.
                log.warning(
                    "maintenance %s skipped: another %s pass is running",
                    job,
                    job,
                    extra={"action": f"maintain.{job}.skipped"},
                )
                return {"job": job, "skipped": "another pass of this job is running"}
            summary = run_job(
                rt.engine,
                job,
                now=utcnow(),
                ttl=settings.ttl(),
                purge_after=timedelta(days=settings.purge_after_days),
                tenant=tenant,
                dry_run=dry_run,
            )
        out = summary.to_json()
        out.pop("per_tenant")
        return out

    return maintain


consolidate_task = _task("consolidate")
expire_task = _task("expire")
decay_task = _task("decay")
purge_task = _task("purge")


@shared_task(bind=True, name=VOTES_TASK, acks_late=True, reject_on_worker_lost=True)
def votes(self: Task, handle: str, batch: list[dict[str, Any]]) -> dict[str, Any]:
    """Apply a batch of run votes (sent to the memory-writer queue): commit, then ack.

    Each vote names its run (`Vote.run_id`) and counts only for a memory that run was
    given; the result lists the refused ones with their reasons."""
    rt = runtime_of(self.app)
    report = apply_vote_batch(rt.engine, handle, [Vote.from_json(v) for v in batch], utcnow())
    return {"handle": handle, **report.to_json()}
