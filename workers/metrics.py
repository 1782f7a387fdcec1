"""Prometheus metrics of nightshift, computed from the database at scrape time.

Counting in the database rather than in each worker process means every
process's work is counted (prefork children, several machines), nothing resets
when a worker restarts, and the exporter is one small process:
`nightshift metrics` (port NIGHTSHIFT_METRICS_PORT).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

from celery import Celery
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from memory import write_audit
from schedules.fires import FireOutcome, Origin
from schedules.tables import fires
from workers import health, write_attempts
from workers.runtime import Runtime
from workers.tables import runs

WINDOW = timedelta(hours=1)
RECENT_LIMIT = 5000


class NightshiftCollector(Collector):
    def __init__(self, rt: Runtime, app: Celery, clock: Callable[[], datetime] | None = None):
        self.rt, self.app = rt, app
        self.clock = clock or (lambda: datetime.now(UTC))

    def collect(self) -> Iterator[Metric]:
        now = self.clock()
        yield from self._runs(now)
        yield from self._writes()
        yield _gauge(
            "nightshift_review_queue_depth",
            "Memories waiting for review.",
            health.review_queue_depth(self.rt),
        )
        yield _gauge(
            "nightshift_writes_given_up",
            "Write messages given up in the last 24 hours: each took its writer down on"
            " every attempt, and nothing of it was stored.",
            len(write_attempts.given_up_since(self.rt.engine, now - health.GIVEN_UP_WINDOW)),
        )
        lag = health.oldest_pending_write(self.rt, now)
        yield _gauge(
            "nightshift_writer_lag_seconds",
            "Age of the oldest run whose candidates the writer has not applied.",
            lag or 0.0,
        )
        depths = GaugeMetricFamily(
            "nightshift_queue_depth", "Messages waiting per queue.", labels=["queue"]
        )
        consumers = GaugeMetricFamily(
            "nightshift_queue_consumers",
            "Consumers per queue, as the broker counts them (RabbitMQ only).",
            labels=["queue"],
        )
        try:
            for queue, state in health.queue_states(self.app).items():
                depths.add_metric([queue], state.depth)
                if state.consumers is not None:
                    consumers.add_metric([queue], state.consumers)
        except Exception:  # an unreachable broker leaves the families empty, not the scrape
            pass
        yield depths
        yield consumers

    def _runs(self, now: datetime) -> Iterator[Metric]:
        total = CounterMetricFamily(
            "nightshift_runs", "Runs by agent and status.", labels=["agent", "status"]
        )
        query = select(runs.c.agent, runs.c.status, func.count()).group_by(
            runs.c.agent, runs.c.status
        )
        recent_q = (
            select(
                runs.c.agent,
                runs.c.started_at,
                runs.c.finished_at,
                runs.c.loaded_ids,
            )
            .where(runs.c.finished_at >= now - WINDOW)
            .order_by(runs.c.finished_at.desc())
            .limit(RECENT_LIMIT)
        )
        # Beat's own fires only, as beat recorded them: a backfill or a manual trigger
        # of a past fire time is not beat running late, and a run the reaper sent again
        # has its `enqueued_at` moved (both paged on-call after a routine backfill).
        fired_q = (
            select(fires.c.fire_time, fires.c.recorded_at)
            .where(
                fires.c.origin == Origin.BEAT.value,
                fires.c.outcome == FireOutcome.RUN.value,
                fires.c.recorded_at >= now - WINDOW,
            )
            .order_by(fires.c.recorded_at.desc())
            .limit(RECENT_LIMIT)
        )
        with self.rt.engine.connect() as conn:
            for agent, status, count in conn.execute(query):
                total.add_metric([agent, status], count)
            recent = conn.execute(recent_q).all()
            fired = conn.execute(fired_q).all()
        yield total

        duration = GaugeMetricFamily(
            "nightshift_run_duration_seconds",
            "Run duration over the last hour.",
            labels=["agent", "quantile"],
        )
        loaded = GaugeMetricFamily(
            "nightshift_memories_loaded_per_run",
            "Mean memories given to a run, last hour.",
            labels=["agent"],
        )
        beat_lag = GaugeMetricFamily(
            "nightshift_beat_lag_seconds",
            "Largest delay between a fire's due time and beat sending its run, last hour"
            " (beat's own fires: not backfills, manual triggers or the reaper's resends).",
        )
        by_agent: dict[str, list[tuple[float, int]]] = {}
        worst_lag = 0.0
        for row in recent:
            if row.started_at and row.finished_at:
                seconds = (row.finished_at - row.started_at).total_seconds()
                by_agent.setdefault(row.agent, []).append(
                    (seconds, len(json.loads(row.loaded_ids)))
                )
        for agent, samples in by_agent.items():
            seconds = sorted(s for s, _ in samples)
            for q in (0.5, 0.95, 0.99):
                duration.add_metric(
                    [agent, str(q)], seconds[min(len(seconds) - 1, int(q * len(seconds)))]
                )
            loaded.add_metric([agent], statistics.fmean(n for _, n in samples))
        for fire_time, recorded_at in fired:
            worst_lag = max(worst_lag, (recorded_at - fire_time).total_seconds())
        beat_lag.add_metric([], worst_lag)
        yield from (duration, loaded, beat_lag)

    def _writes(self) -> Iterator[Metric]:
        decisions = CounterMetricFamily(
            "nightshift_write_decisions",
            "Writer decisions per candidate, by outcome.",
            labels=["outcome"],
        )
        with self.rt.engine.connect() as conn:
            counts = write_audit.outcome_counts(conn)
        for outcome, count in sorted(counts.items()):
            decisions.add_metric([outcome], count)
        yield decisions


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
