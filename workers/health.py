"""What `nightshift status` and the metrics exporter look at: the live state of a deployment.

Every probe is bounded in time and reports failure as data, so one dead service
shows up as one failed line instead of a traceback.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from celery import Celery
from kombu.exceptions import ChannelError
from sqlalchemy import func, select

from memory.engine import missing_sqlite_file, safe_url
from memory.records import Status
from memory.tables import memories, receipts
from schedules import lease as lease_queries
from workers import schema, serving, write_attempts
from workers.runtime import Runtime
from workers.sharding import is_write_queue
from workers.tables import runs


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    ok: bool
    detail: str
    value: Any = None


@dataclass(frozen=True, slots=True)
class Report:
    checks: tuple[Check, ...]
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def healthy(self) -> bool:
        return all(c.ok for c in self.checks)

    def to_json(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "checks": [
                {"name": c.name, "ok": c.ok, "detail": c.detail, "value": c.value}
                for c in self.checks
            ],
            **self.facts,
        }


def probe(name: str, fn: Callable[[], Check]) -> Check:
    return probe_all(name, lambda: [fn()])[0]


def probe_all(name: str, fn: Callable[[], list[Check]]) -> list[Check]:
    """`probe` for a probe of several checks: one failed `name` line when it raises."""
    try:
        return fn()
    except Exception as error:  # a probe reports failure, it never raises
        first = str(error).strip().splitlines()[0] if str(error).strip() else ""
        return [Check(name, False, f"{type(error).__name__}: {first}")]


def database(rt: Runtime) -> Check:
    if (missing := missing_sqlite_file(rt.settings.database_url)) is not None:
        return Check("database", False, f"no nightshift database at {missing}")
    started = time.monotonic()
    with rt.engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")
    took = (time.monotonic() - started) * 1000
    current = schema.is_current(rt.engine)
    detail = f"{safe_url(rt.settings.database_url)} answered in {took:.0f} ms"
    return Check("database", current, detail + ("" if current else "; run `nightshift db upgrade`"))


@dataclass(frozen=True, slots=True)
class QueueState:
    depth: int  # messages waiting (not those a worker holds unacknowledged)
    consumers: int | None  # None: the broker does not count them (Redis, the folder broker)


def queue_states(app: Celery) -> dict[str, QueueState]:
    states: dict[str, QueueState] = {}
    with app.connection_for_read() as conn:
        conn.ensure_connection(max_retries=1, timeout=3)
        counts_consumers = conn.transport.driver_type == "amqp"  # RabbitMQ's own count
        channel = conn.default_channel
        for queue in (q.name for q in app.conf.task_queues):
            try:
                ok = channel.queue_declare(queue, passive=True)
            except ChannelError:  # never declared: nothing was ever sent to it, or read it
                states[queue] = QueueState(0, 0 if counts_consumers else None)
                continue
            states[queue] = QueueState(
                ok.message_count, ok.consumer_count if counts_consumers else None
            )
    return states


def broker(app: Celery) -> list[Check]:
    """The broker's line (messages waiting per queue) and, on a broker that counts
    consumers, whether each memory-writer queue has exactly one."""
    states = queue_states(app)
    shown = ", ".join(f"{q} {s.depth}" for q, s in states.items())
    depths = {q: s.depth for q, s in states.items()}
    checks = [Check("broker", True, f"{app.conf.broker_url.split('://')[0]}: {shown}", depths)]
    counted = {
        q: s.consumers for q, s in states.items() if is_write_queue(q) and s.consumers is not None
    }
    if counted:  # a broker that counts consumers: RabbitMQ
        checks.append(writer_queues(counted))
    return checks


WRITER_QUEUES = "writer queues"


def writer_queues(consumers: dict[str, int], *, answered: bool = False) -> Check:
    """Each memory-writer queue needs exactly one consumer: none and its tenants' writes
    wait, two and a scope's writes may apply out of order. The broker's count
    (RabbitMQ) sees any consumer, of any name; where the broker does not count them
    (Redis, the folder broker) the count is of the workers that `answered` naming
    the queues they read (`answered_consumers`)."""
    wrong = {q: n for q, n in consumers.items() if n != 1}
    detail = ", ".join(
        f"{q} {'no consumer' if n == 0 else f'{n} consumers'}" for q, n in wrong.items()
    )
    if any(n > 1 for n in wrong.values()):
        detail += " (one per queue keeps a scope's writes in order)"
    if wrong and answered:
        detail += " among the workers that answer"
    return Check(WRITER_QUEUES, not wrong, detail or "one consumer each", consumers)


def answered_consumers(answers: dict[str, Any], queues: Iterable[str]) -> dict[str, int] | None:
    """How many answering workers read each memory-writer queue: those of `queues`
    (the ones this deployment's settings name) and any other a worker reads (a
    shard the settings here do not know). None when a writer's answer lists no
    queues (a worker from before answers named them): it cannot be counted."""
    counts = {q: 0 for q in queues if is_write_queue(q)}
    for name, answer in answers.items():
        read = answer.get("queues") if isinstance(answer, dict) else None
        if read is None:
            if _role(name) == "writer":
                return None
            continue
        for queue in filter(is_write_queue, read):
            counts[queue] = counts.get(queue, 0) + 1
    return counts


ROLES = ("runs", "writer")
"""Node names of nightshift's workers: `<role>@host`, or `<role>-<n>@host` for a writer
shard (`workers.cli.supervisor`)."""


def worker_answers(app: Celery, timeout: float = 2.0) -> dict[str, Any]:
    """Every worker's answer to `workers.serving.COMMAND`, by node name: the database
    it serves and the queues it reads."""
    replies = app.control.broadcast(serving.COMMAND, reply=True, timeout=timeout) or []
    return {name: answer for reply in replies for name, answer in reply.items()}


def judged(answers: dict[str, Any], here: str | None) -> list[Check]:
    """The run workers and memory writers that answer (`worker_answers`), whether each
    serves the database `here` (`workers.serving.identity`; None when that is
    unknown), and any other worker on the broker that serves another database."""
    checks = [
        _answering("run workers", "runs", answers, here),
        _answering("memory writer", "writer", answers, here),
    ]
    strays = _elsewhere([n for n in answers if _role(n) not in ROLES], answers, here)
    if strays:
        checks.append(Check("other workers", False, _on_another_database(strays), sorted(strays)))
    return checks


def _role(name: str) -> str:
    return name.partition("@")[0].partition("-")[0]


def _answering(title: str, role: str, answers: dict[str, Any], here: str | None) -> Check:
    names = sorted(name for name in answers if _role(name) == role)
    elsewhere = _elsewhere(names, answers, here)
    detail = f"{len(names)} answering"
    if elsewhere:
        detail += f", {_on_another_database(elsewhere)}"
    # One writer per queue keeps a scope's writes in order: two nodes of one name
    # (writer@a and writer@b, both on `memory.write`) share a queue.
    nodes = [name.partition("@")[0] for name in names]
    shared = sorted({node for node in nodes if role == "writer" and nodes.count(node) > 1})
    if shared:
        detail += "; " + "; ".join(
            f"{nodes.count(node)} writers named {node} share one queue (one per queue keeps"
            " a scope's writes in order)"
            for node in shared
        )
    return Check(title, bool(names) and not elsewhere and not shared, detail, names)


def _elsewhere(names: list[str], answers: dict[str, Any], here: str | None) -> dict[str, Any]:
    if here is None:
        return {}
    return {name: answers[name] for name in names if _identity(answers[name]) != here}


def _on_another_database(elsewhere: dict[str, Any]) -> str:
    where = "; ".join(f"{name} serves {_shown(answer)}" for name, answer in elsewhere.items())
    return f"{len(elsewhere)} on another database ({where})"


def _identity(answer: Any) -> str:
    return str(answer.get("identity", "")) if isinstance(answer, dict) else ""


def _shown(answer: Any) -> str:
    if not isinstance(answer, dict):
        return "a database it does not name"
    if answer.get("error"):
        return f"a database it cannot reach: {answer['error']}"
    return str(answer.get("url") or "a database it does not name")


def leading_beat(rt: Runtime, now: datetime) -> Check:
    with rt.engine.connect() as conn:
        lease = lease_queries.current(conn)
    if lease is None:
        return Check("leading beat", False, "no beat has ever led (start `nightshift beat`)")
    if not lease.live(now):
        ago = (now - lease.expires_at).total_seconds()
        return Check("leading beat", False, f"{lease.holder}'s lease lapsed {ago:.0f}s ago")
    left = (lease.expires_at - now).total_seconds()
    return Check(
        "leading beat", True, f"{lease.holder} (term {lease.term}, lease {left:.0f}s)", lease.holder
    )


def standby_beats(rt: Runtime, now: datetime) -> str:
    """The beats ready to take over from the leader, each with how long it has stood by."""
    with rt.engine.connect() as conn:
        standing = lease_queries.standbys(conn, now)
    if not standing:
        return "none"
    return ", ".join(
        f"{s.holder} (for {_age(max((now - s.acquired_at).total_seconds(), 0.0))})"
        for s in standing
    )


def oldest_pending_write(rt: Runtime, now: datetime) -> float | None:
    """Seconds since the oldest run whose candidates the writer has not applied yet."""
    query = (
        select(func.min(runs.c.finished_at))
        .select_from(runs.outerjoin(receipts, receipts.c.handle == runs.c.write_handle))
        .where(runs.c.write_handle != "", receipts.c.handle.is_(None))
    )
    with rt.engine.connect() as conn:
        oldest = conn.execute(query).scalar()
    if oldest is None:
        return None
    return max((now - oldest).total_seconds(), 0.0)


GIVEN_UP_WINDOW = timedelta(hours=24)
"""How long a given-up write keeps status unhealthy, unless acknowledged before."""


def given_up_writes(rt: Runtime, now: datetime) -> Check:
    """Write messages given up in the last `GIVEN_UP_WINDOW` that no operator has
    acknowledged: each one is a batch that took its writer down on every attempt,
    and a run's memory that was not stored."""
    given = write_attempts.given_up_since(rt.engine, now - GIVEN_UP_WINDOW)
    if not given:
        return Check("given-up writes", True, "none unacknowledged in the last 24 h", [])
    newest = given[0]
    ago = max((now - newest.at).total_seconds(), 0.0)
    detail = (
        f"{len(given)} in the last 24 h, the newest {newest.handle} after"
        f" {newest.attempts} attempts {_age(ago)} ago; `nightshift memory receipt"
        " HANDLE` lists what was not stored, `nightshift memory given-up --ack HANDLE`"
        " once it is dealt with"
    )
    return Check("given-up writes", False, detail, [g.handle for g in given])


def _age(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.0f}h"


def review_queue_depth(rt: Runtime) -> int:
    query = select(func.count()).where(memories.c.status == Status.PENDING_REVIEW.value)
    with rt.engine.connect() as conn:
        return int(conn.execute(query).scalar_one())


def report(
    rt: Runtime, app: Celery, clock: Callable[[], datetime], *, max_write_lag: float = 300.0
) -> Report:
    """Every check, in order. The clock is read after the workers answered (that
    takes up to their timeout), so a lease that lapsed meanwhile reads as lapsed."""
    checks = [probe("database", lambda: database(rt)), *probe_all("broker", lambda: broker(app))]
    try:
        here = serving.identity(rt.engine) if checks[0].ok else None
    except Exception:  # the database check already says what is wrong with it
        here = None
    try:
        answers = worker_answers(app)
    except Exception as error:
        checks.append(Check("workers", False, f"{type(error).__name__}: {error}"))
    else:
        checks += judged(answers, here)
        counted = answered_consumers(answers, (q.name for q in app.conf.task_queues))
        if counted is not None and not any(c.name == WRITER_QUEUES for c in checks):
            checks.append(writer_queues(counted, answered=True))  # the broker did not count
    db_ok = checks[0].ok
    if db_ok:
        now = clock()
        checks.append(probe("leading beat", lambda: leading_beat(rt, now)))
        lag = oldest_pending_write(rt, now)
        checks.append(
            Check(
                "pending writes",
                lag is None or lag <= max_write_lag,
                "none" if lag is None else f"oldest waiting {lag:.0f}s",
                lag,
            )
        )
        checks.append(probe("given-up writes", lambda: given_up_writes(rt, now)))
    facts: dict[str, Any] = {}
    if db_ok:
        facts["standby_beats"] = standby_beats(rt, now)
        facts["review_queue"] = review_queue_depth(rt)
    return Report(tuple(checks), facts)
