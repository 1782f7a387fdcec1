"""Health report and metrics against a real database and the embedded broker."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import select

from schedules import fires
from schedules.fires import FireOutcome, FireRecord, Origin
from schedules.tables import leases
from workers import health, runs, schema
from workers.app import create_app
from workers.lifecycle import execute
from workers.metrics import NightshiftCollector
from workers.runs import RunRequest
from workers.runtime import Runtime
from workers.settings import Settings

pytestmark = pytest.mark.integration


@pytest.fixture
def rt(database_url: str, tmp_path: Path) -> Iterator[Runtime]:
    runtime = Runtime(Settings(data_dir=tmp_path, database_url=database_url))
    schema.upgrade(runtime.engine)
    yield runtime
    runtime.engine.dispose()


def finished_demo_run(rt: Runtime, key: str) -> None:
    with rt.engine.begin() as conn:
        runs.create(
            conn,
            [
                RunRequest(
                    key=key,
                    agent="feed-watcher",
                    tenant="t",
                    user="u",
                    trigger_kind="heartbeat",
                    fire_time=datetime.now(UTC) - timedelta(seconds=2),
                )
            ],
            datetime.now(UTC),
        )
    execute(rt, key, submit=lambda *a, **k: None, clock=lambda: datetime.now(UTC))


def test_report_names_what_is_down_and_is_unhealthy_without_consumers(rt: Runtime) -> None:
    app = create_app(rt.settings)
    report = health.report(rt, app, lambda: datetime.now(UTC))
    by_name = {c.name: c for c in report.checks}
    assert by_name["database"].ok and by_name["broker"].ok
    assert by_name["broker"].value == {"runs": 0, "memory.write": 0, "maintenance": 0}
    assert not by_name["memory writer"].ok and not report.healthy


def test_pending_write_ages_until_the_writer_applies_it(rt: Runtime) -> None:
    finished_demo_run(rt, "demo@1")
    later = datetime.now(UTC) + timedelta(minutes=10)
    lag = health.oldest_pending_write(rt, later)
    assert lag is not None and 590 < lag < 610
    report = health.report(rt, create_app(rt.settings), lambda: later, max_write_lag=300)
    assert not {c.name: c for c in report.checks}["pending writes"].ok


def test_metrics_move_after_a_run(rt: Runtime) -> None:
    registry = CollectorRegistry()
    registry.register(NightshiftCollector(rt, create_app(rt.settings)))
    assert b"nightshift_runs_total{" not in generate_latest(registry)
    finished_demo_run(rt, "demo@1")
    text = generate_latest(registry).decode()
    assert 'nightshift_runs_total{agent="feed-watcher",status="succeeded"} 1.0' in text
    assert 'nightshift_run_duration_seconds{agent="feed-watcher",quantile="0.5"}' in text
    assert "nightshift_writer_lag_seconds" in text
    assert 'nightshift_queue_depth{queue="runs"} 0.0' in text
    assert "nightshift_beat_lag_seconds 0.0" in text  # no fire of beat's own yet


def test_beat_lag_counts_beat_s_own_fires_not_backfills(rt: Runtime) -> None:
    registry = CollectorRegistry()
    registry.register(NightshiftCollector(rt, create_app(rt.settings)))
    now = datetime.now(UTC)
    late, backfilled = now - timedelta(seconds=7), now - timedelta(hours=2)
    with rt.engine.begin() as conn:
        fires.record(
            conn,
            [
                FireRecord("pulse", late, FireOutcome.RUN, run_key="pulse@1"),
                FireRecord(
                    "pulse", backfilled, FireOutcome.RUN, run_key="pulse@0", origin=Origin.BACKFILL
                ),
            ],
            now,
        )
    text = generate_latest(registry).decode()
    lag = next(line for line in text.splitlines() if line.startswith("nightshift_beat_lag"))
    assert 6.5 < float(lag.split()[1]) < 60


def test_status_names_the_leading_beat_and_notices_its_lease_lapse(rt: Runtime) -> None:
    from schedules import lease

    now = datetime.now(UTC)
    assert not health.leading_beat(rt, now).ok
    with rt.engine.begin() as conn:
        lease.acquire(conn, "beat-a@host", now, timedelta(seconds=10))
    check = health.leading_beat(rt, now + timedelta(seconds=3))
    assert check.ok and check.value == "beat-a@host"
    lapsed = health.leading_beat(rt, now + timedelta(seconds=40))
    assert not lapsed.ok and "lapsed 30s ago" in lapsed.detail


def test_status_names_the_standby_beats_and_forgets_those_gone_a_day(rt: Runtime) -> None:
    from schedules import lease

    now = datetime.now(UTC)
    assert health.standby_beats(rt, now) == "none"
    with rt.engine.begin() as conn:
        lease.stand_by(conn, "beat-gone@host", now - timedelta(days=2), timedelta(seconds=10))
        lease.stand_by(conn, "beat-b@host", now - timedelta(seconds=90), timedelta(seconds=10))
        lease.stand_by(conn, "beat-b@host", now, timedelta(seconds=10))  # its next poll
    assert health.standby_beats(rt, now) == "beat-b@host (for 90s)"
    with rt.engine.begin() as conn:  # a new standby's first word clears rows lapsed a day
        lease.stand_by(conn, "beat-c@host", now, timedelta(seconds=10))
        holders = conn.execute(select(leases.c.holder).order_by(leases.c.holder)).scalars()
        assert list(holders) == ["beat-b@host", "beat-c@host"]
    assert health.standby_beats(rt, now + timedelta(seconds=11)) == "none"


def test_report_reads_the_clock_after_the_workers_answered(
    rt: Runtime, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asking the workers takes up to their timeout; a lease that lapsed meanwhile
    must not read as live because the time was taken before."""
    order: list[str] = []
    monkeypatch.setattr(health, "worker_answers", lambda app: order.append("workers") or {})

    def clock() -> datetime:
        order.append("clock")
        return datetime.now(UTC)

    health.report(rt, create_app(rt.settings), clock)
    assert order == ["workers", "clock"]


def test_a_given_up_write_makes_status_unhealthy_for_a_day_and_is_counted(rt: Runtime) -> None:
    from workers import write_attempts

    now = datetime.now(UTC)
    assert health.given_up_writes(rt, now).ok
    for _ in range(3):
        write_attempts.came_back(rt.engine, "write:poison@1", now)
    write_attempts.gave_up(rt.engine, "write:poison@1", now)
    check = health.given_up_writes(rt, now + timedelta(minutes=5))
    assert not check.ok and check.value == ["write:poison@1"]
    assert "1 in the last 24 h, the newest write:poison@1 after 3 attempts 5m ago" in check.detail
    report = health.report(rt, create_app(rt.settings), lambda: now)
    assert "given-up writes" in {c.name for c in report.checks if not c.ok}
    registry = CollectorRegistry()
    registry.register(NightshiftCollector(rt, create_app(rt.settings), clock=lambda: now))
    assert "nightshift_writes_given_up 1.0" in generate_latest(registry).decode()
    assert health.given_up_writes(rt, now + timedelta(hours=25)).ok


def test_an_acknowledged_given_up_write_leaves_status_healthy(rt: Runtime) -> None:
    """The operator lists the given-up writes, acknowledges one, then the rest: each
    acknowledged one stops counting in status and the metric, and stays listed with
    who acknowledged it. A wrong handle acknowledges nothing."""
    from click.testing import CliRunner

    from workers import write_attempts
    from workers.cli import main_group

    now = datetime.now(UTC)
    for handle in ("write:a@1", "write:b@1"):
        write_attempts.came_back(rt.engine, handle, now)
        write_attempts.gave_up(rt.engine, handle, now)

    def given_up(*args: str) -> tuple[int, str]:
        base = ["--data-dir", str(rt.settings.data_dir), "--database-url", rt.settings.database_url]
        result = CliRunner().invoke(main_group, [*base, "memory", "given-up", *args])
        return result.exit_code, result.output

    code, out = given_up("--json")
    assert code == 0
    assert [(g["handle"], g["acknowledged_at"]) for g in json.loads(out)] == [
        ("write:a@1", None),
        ("write:b@1", None),
    ]
    code, out = given_up("--ack", "write:a@1", "--ack", "write:nope@1")
    assert code == 3 and "no given-up write 'write:nope@1' on record" in out
    assert health.given_up_writes(rt, now).value == ["write:a@1", "write:b@1"]

    code, out = given_up("--ack", "write:a@1", "--actor", "ops-ana")
    assert (code, out) == (0, "acknowledged 1 given-up write\n")
    assert health.given_up_writes(rt, now).value == ["write:b@1"]
    code, out = given_up("--ack", "write:a@1", "--actor", "ops-bo")
    assert out == "write:a@1 was acknowledged before, by ops-ana\nacknowledged 0 given-up writes\n"

    code, out = given_up("--ack-all", "--actor", "ops-bo", "--json")
    assert json.loads(out) == {"acknowledged": ["write:b@1"]}
    check = health.given_up_writes(rt, now)
    assert check.ok and check.detail == "none unacknowledged in the last 24 h"
    registry = CollectorRegistry()
    registry.register(NightshiftCollector(rt, create_app(rt.settings), clock=lambda: now))
    assert "nightshift_writes_given_up 0.0" in generate_latest(registry).decode()
    code, out = given_up()
    assert "by ops-ana" in out and "by ops-bo" in out
