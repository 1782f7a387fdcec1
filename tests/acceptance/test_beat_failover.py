"""Two real `celery beat` processes on Redis + PostgreSQL: one leads, none repeats a
fire, and the standby takes over within 30 s of the leader's SIGKILL; and an applied
edit reaches a running beat without a restart."""

from __future__ import annotations

import json
import re
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from schedules import lease
from tests.acceptance.harness import System, base_env
from tests.services import postgres_database, redis_database
from workers.runs import Run

pytestmark = pytest.mark.acceptance

SECONDLY = """
[[schedule]]
name = "hb-{n}"
agent = "gated"
tenant = "acme"
heartbeat = "1s"
overlap = "allow_all"
catchup = "all"
catchup_window = "5m"
"""

CRON_SECONDLY = """
[[schedule]]
name = "cron-every-second"
agent = "gated"
tenant = "acme"
cron = "* * * * * *"
timezone = "Europe/Berlin"
overlap = "allow_all"
catchup = "all"
catchup_window = "5m"
"""

SENT = re.compile(r"beat sent run (\S+)")


@pytest.fixture
def redis_pg(tmp_path: Path) -> Iterator[System]:
    with postgres_database() as db_url, redis_database() as redis_url:
        system = System(tmp_path, base_env(tmp_path, db_url, redis_url))
        assert system.cli("db", "upgrade").returncode == 0
        try:
            yield system
        finally:
            system.discard()
            system.engine.dispose()


def holder(system: System) -> lease.Lease | None:
    with system.engine.connect() as conn:
        found = lease.current(conn)
    return (
        found if found is not None and found.live(datetime.now(found.expires_at.tzinfo)) else None
    )


def leader_name(system: System, names: list[str]) -> str | None:
    held = holder(system)
    if held is None:
        return None
    pid = int(held.holder.split(":")[1])
    return next((n for n in names if n in system.procs and system.procs[n].pid == pid), None)


def scheduled_runs(system: System) -> list[Run]:
    return [r for r in system.runs() if r.schedule]


def sent_keys(system: System) -> Counter[str]:
    sent: Counter[str] = Counter()
    for log in system.root.glob("beat-*.log"):
        sent.update(SENT.findall(log.read_text(errors="replace")))
    return sent


def assert_contiguous(runs: list[Run]) -> None:
    by_schedule: dict[str, list[datetime]] = {}
    for r in runs:
        assert r.fire_time is not None
        by_schedule.setdefault(r.schedule, []).append(r.fire_time)
    assert len(by_schedule) == 4, sorted(by_schedule)
    for name, times in by_schedule.items():
        times.sort()
        gaps = [
            b - a for a, b in zip(times, times[1:], strict=False) if b - a != timedelta(seconds=1)
        ]
        assert not gaps, f"{name}: missed fires, gaps {gaps[:5]}"


def test_two_beats_never_repeat_a_fire_and_the_standby_takes_over(redis_pg: System) -> None:
    system = redis_pg
    files = system.root / "schedules"
    files.mkdir()
    for n in range(3):
        (files / f"hb-{n}.toml").write_text(SECONDLY.format(n=n))
    (files / "cron.toml").write_text(CRON_SECONDLY)
    applied = system.cli("schedules", "apply", str(files))
    assert applied.returncode == 0, applied.stderr

    names = ["beat-a", "beat-b"]
    system.start("beat", "beat-a")
    system.wait_for("beat-a to lead", lambda: leader_name(system, names), timeout=60)
    system.start("beat", "beat-b")

    # ~60 s of four one-second schedules under two beats.
    started = time.monotonic()
    system.wait_for(
        "a minute of fires",
        lambda: time.monotonic() - started > 60 and len(scheduled_runs(system)) > 200,
        timeout=120,
    )
    leader = leader_name(system, names)
    assert leader is not None
    standby = next(n for n in names if n != leader)
    before = scheduled_runs(system)
    assert_contiguous(before)
    assert all(n == 1 for n in sent_keys(system).values())
    # `nightshift status` names the standby, ready to take over (no workers run here,
    # so it says unhealthy; the beats are what is read).
    status = system.cli("status", "--json")
    standby_pid = system.procs[standby].pid
    assert f":{standby_pid}:" in json.loads(status.stdout)["standby_beats"], status.stdout

    system.kill(leader)  # SIGKILL: no lease release, no goodbye
    killed_at = datetime.now(UTC)
    system.wait_for("the standby to lead", lambda: leader_name(system, [standby]), timeout=45)
    new_lease = holder(system)
    assert new_lease is not None
    assert new_lease.acquired_at - killed_at < timedelta(seconds=30)
    system.wait_for(
        "runs fired by the new leader",
        lambda: any(
            r.fire_time and r.fire_time > new_lease.acquired_at for r in scheduled_runs(system)
        ),
        timeout=30,
    )
    # 20 more seconds under the new leader.
    resumed = time.monotonic()
    system.wait_for("20 s under beat-b", lambda: time.monotonic() - resumed > 20, timeout=30)
    system.stop()

    runs = scheduled_runs(system)
    keys = [r.key for r in runs]
    assert len(keys) == len(set(keys))
    assert_contiguous(runs)  # the fires missed during the takeover were caught up
    sent = sent_keys(system)
    repeated = {k: n for k, n in sent.items() if n > 1}
    assert not repeated, repeated
    assert set(sent) == set(keys)  # every run row was sent, exactly once

    with system.engine.connect() as conn:
        from schedules.tables import fires

        decided_by = set(conn.execute(select(fires.c.decided_by).distinct()).scalars())
    assert len(decided_by) == 2  # both beats fired, one after the other


EDITABLE = """
[[schedule]]
name = "editable"
agent = "gated"
tenant = "acme"
heartbeat = "{every}"
overlap = "allow_all"
"""


@pytest.mark.parametrize("system", ["embedded"], indirect=True)
def test_an_applied_edit_reaches_the_running_beat(system: System) -> None:
    path = system.root / "editable.toml"
    path.write_text(EDITABLE.format(every="1h"))
    assert system.cli("schedules", "apply", str(path)).returncode == 0
    beat = system.start("beat")
    system.wait_for("beat to lead", lambda: holder(system))
    assert system.runs() == []

    path.write_text(EDITABLE.format(every="2s"))
    edited = system.cli("schedules", "apply", str(path))
    assert edited.returncode == 0 and "update editable" in edited.stdout, edited.stdout
    nxt = system.cli("schedules", "next", "editable", "-n", "2", "--json")
    assert nxt.returncode == 0

    def two_runs() -> list[Run] | None:
        runs = sorted((r for r in system.runs() if r.schedule == "editable"), key=lambda r: r.key)
        return runs if len(runs) >= 2 else None

    first, second = system.wait_for("runs every 2 s", two_runs, timeout=30)[:2]
    assert second.fire_time - first.fire_time == timedelta(seconds=2)  # type: ignore[operator]
    assert beat.poll() is None  # the same process: no restart
    shown = system.cli("schedules", "show", "editable", "--json")
    assert shown.returncode == 0 and '"every": 2' in shown.stdout
