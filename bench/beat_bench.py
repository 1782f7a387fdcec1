"""nightshift's beat against Celery's default `PersistentScheduler` (and RedBeat, if
installed: `pip install -e '.[bench]'`), on the same entries.

    .venv/bin/python -m bench.beat_bench            # 100, 1k, 10k, 50k schedules (~5 min)
    .venv/bin/python -m bench.beat_bench --sizes 100,1000 --burst 200   # quick look

Measures, for each scheduler in the same run:
- idle tick: one `tick()` with nothing due, at each size (median, p99);
- due sends per second: 2,000 entries due at once among 50,000 (sends are counted
  by a recording `app.send_task` on every side: the broker is not measured; our side
  still creates the 2,000 run rows and fire records in its SQLite database);
- start-up: constructing the scheduler and its first tick, at 50,000; ours also
  on PostgreSQL (`--postgres-url`, a database of its own, dropped afterwards), and
  on SQLite with every schedule last edited at an instant of its own (so no two
  ask croniter for the fire after the same instant).

Our start-up and burst are run `--repeat` times (median; peers once: their burst
alone is capped at `--burst-cap` seconds). The machine is shared: run it when idle.

Entries: `M * * * *` crontabs (UTC), M one of 46 minutes, the same shape on every
side (`schedules.definition.Cron` for ours, `celery.schedules.crontab` for the peers).
Our beat runs with an injected clock so that a tick's cost is measured without the
wall clock moving schedules into view; its once-per-`reload_seconds` reload query
is measured separately ("reload poll").
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from celery import Celery
from celery.beat import PersistentScheduler
from celery.schedules import crontab
from sqlalchemy import Engine, insert

from bench.runs_bench import POSTGRES_URL, postgres
from schedules.definition import Cron, Overlap, Schedule
from schedules.tables import schedules as schedules_table
from workers import schema
from workers.app import create_app
from workers.beat import Scheduler
from workers.runtime import runtime_of
from workers.settings import Settings

T = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)  # the burst minute: M = 0
SIZES = (100, 1_000, 10_000, 50_000)


class Recorder:
    """Stands in for `app.send_task`: counts sends, talks to no broker."""

    def __init__(self) -> None:
        self.sent = 0

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.sent += 1


def minute_of(i: int, due: int, base: int = 0) -> int:
    """The first `due` entries fire at minute `base` (the burst); the rest at one of
    45 other minutes, none within 10 minutes after `base`."""
    return base % 60 if i < due else (base + 10 + i % 45) % 60


# -- ours ---------------------------------------------------------------------------


def our_app(folder: Path, database_url: str | None = None) -> Celery:
    settings = Settings(
        data_dir=folder,
        database_url=database_url or f"sqlite:///{folder / 'bench.db'}",
        broker_url="memory://",
        result_backend="cache+memory://",
    )
    app = create_app(settings)
    app.conf.beat_schedule = {}
    schema.upgrade(runtime_of(app).engine)
    return app


def load_ours(app: Celery, n: int, due: int, *, edited_apart: bool = False) -> None:
    """Schedules that last fired a minute before `T` (edited an hour before); or, with
    `edited_apart`, never fired and each edited at its own instant in the 80 to 20
    seconds before `T` (start-up's clock is `T - 20 s`: nothing is due at once)."""
    rows = []
    for i in range(n):
        s = Schedule(
            name=f"s{i}",
            agent="bench",
            tenant="acme",
            trigger=Cron(f"{minute_of(i, due)} * * * *"),
            overlap=Overlap.ALLOW_ALL,
        )
        if edited_apart:
            rows.append(stored_row(s, T - timedelta(seconds=80 - 60 * i / n), None))
        else:
            rows.append(stored_row(s, T - timedelta(hours=1), T - timedelta(minutes=1)))
    insert_rows(runtime_of(app).engine, rows)


def stored_row(s: Schedule, updated_at: datetime, last_fire_at: datetime | None) -> dict[str, Any]:
    """An `ns_schedules` row as `apply` would write it, for inserting in bulk."""
    return {
        "name": s.name,
        "definition": json.dumps(s.to_json()),
        "fingerprint": s.fingerprint(),
        "kind": s.kind,
        "revision": 1,
        "updated_at": updated_at,
        "last_fire_at": last_fire_at,
    }


def insert_rows(engine: Engine, rows: list[dict[str, Any]]) -> None:
    with engine.begin() as conn:
        for start in range(0, len(rows), 5_000):
            conn.execute(insert(schedules_table), rows[start : start + 5_000])


def our_scheduler(app: Celery, clock: list[datetime]) -> Scheduler:
    class Clocked(Scheduler):
        def now(self) -> datetime:
            return clock[0]

    return Clocked(app=app)


def start(app: Celery, clock: list[datetime]) -> tuple[Scheduler, float]:
    """Our start-up: construct the beat and run its first tick (it takes the lease and
    loads every schedule); the beat and the seconds it took."""
    started = time.perf_counter()
    beat = our_scheduler(app, clock)
    beat.tick()
    elapsed = time.perf_counter() - started
    assert beat.leading
    return beat, elapsed


def bench_ours(n: int, due: int, idle_ticks: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        app = our_app(Path(folder))
        recorder = Recorder()
        app.send_task = recorder  # type: ignore[method-assign]
        load_ours(app, n, due)
        clock = [T - timedelta(seconds=20)]
        beat, startup = start(app, clock)
        idle = timed(beat.tick, idle_ticks)
        reload = timed(lambda: beat.reload(clock[0]), 20)
        result: dict[str, Any] = {"startup_s": startup, "idle_tick": idle, "reload_poll": reload}
        if due:
            clock[0] = T + timedelta(milliseconds=100)
            started = time.perf_counter()
            beat.tick()  # every due fire goes out in this one tick
            elapsed = time.perf_counter() - started
            assert recorder.sent == due, (recorder.sent, due)
            result["burst"] = {"sent": recorder.sent, "seconds": elapsed}
        beat.close()
        runtime_of(app).engine.dispose()
        return result


def start_ours(n: int, due: int, database_url: str | None, *, edited_apart: bool) -> float:
    """One start-up (construct + first tick) of our beat, on a database filled for it."""
    with tempfile.TemporaryDirectory() as folder:
        app = our_app(Path(folder), database_url)
        app.send_task = Recorder()  # type: ignore[method-assign]
        load_ours(app, n, due, edited_apart=edited_apart)
        beat, startup = start(app, [T - timedelta(seconds=20)])
        beat.close()
        with runtime_of(app).engine.begin() as conn:  # the next run fills it again
            conn.execute(schedules_table.delete())
        runtime_of(app).engine.dispose()
        return startup


def bench_ours_repeated(n: int, due: int, idle_ticks: int, repeat: int) -> dict[str, Any]:
    """Start-up and the burst are single events: run them `repeat` times, keep medians."""
    runs = [bench_ours(n, due, idle_ticks) for _ in range(max(1, repeat))]
    result = dict(runs[len(runs) // 2])
    result["startup_s"] = statistics.median(r["startup_s"] for r in runs)
    result["startup_runs_s"] = [round(r["startup_s"], 3) for r in runs]
    if due:
        seconds = statistics.median(r["burst"]["seconds"] for r in runs)
        result["burst"] = {"sent": due, "seconds": seconds}
        result["burst_runs_s"] = [round(r["burst"]["seconds"], 3) for r in runs]
    return result


# -- Celery's PersistentScheduler ------------------------------------------------------


def celery_app(n: int, due: int) -> Celery:
    app = Celery("bench", broker="memory://", backend="cache+memory://")
    app.conf.timezone = "UTC"
    now = app.now()  # last run "now": nothing is due until the burst makes it so
    # The wall clock runs on: the burst minute is 5 minutes ahead, the others 15 to 59.
    base = now.minute + 5
    app.conf.beat_schedule = {
        f"s{i}": {
            "task": "bench.noop",
            "schedule": crontab(minute=minute_of(i, due, base)),
            "last_run_at": now,
        }
        for i in range(n)
    }
    return app


def burst(beat: Any, recorder: Recorder, due: int, cap: float) -> dict[str, Any]:
    """Tick until `due` sends or `cap` seconds; sends before the burst are reported apart."""
    before = recorder.sent
    started = time.perf_counter()
    while recorder.sent - before < due and time.perf_counter() - started < cap:
        beat.tick()
    return {
        "sent": recorder.sent - before,
        "seconds": time.perf_counter() - started,
        "sent_before_burst": before,
    }


def bench_celery(n: int, due: int, idle_ticks: int, burst_cap: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        app = celery_app(n, due)
        recorder = Recorder()
        app.send_task = recorder  # type: ignore[method-assign]
        started = time.perf_counter()
        beat = PersistentScheduler(app=app, schedule_filename=str(Path(folder) / "beat"))
        beat.tick()
        startup = time.perf_counter() - started
        idle = timed(beat.tick, idle_ticks)
        result: dict[str, Any] = {"startup_s": startup, "idle_tick": idle}
        if due:
            # Make the first `due` entries due now: their last run was before minute 0.
            for i in range(due):
                entry = beat.schedule[f"s{i}"]
                entry.last_run_at = app.now() - timedelta(hours=1, minutes=1)
            beat._heap = None  # rebuild, as after any change of the schedule
            result["burst"] = burst(beat, recorder, due, burst_cap)
        beat.close()
        return result


# -- RedBeat (celery-redbeat, in the `bench` extra) ------------------------------------


def bench_redbeat(
    n: int, due: int, idle_ticks: int, burst_cap: float, redis_url: str
) -> dict[str, Any] | None:
    try:
        from redbeat import RedBeatScheduler, RedBeatSchedulerEntry
    except ImportError:
        return None
    app = celery_app(n, due)
    recorder = Recorder()
    app.send_task = recorder  # type: ignore[method-assign]
    with redbeat_keys(app, redis_url) as prefix:
        started = time.perf_counter()
        beat = RedBeatScheduler(app=app)
        beat.tick()
        startup = time.perf_counter() - started
        idle = timed(beat.tick, idle_ticks)
        result: dict[str, Any] = {"startup_s": startup, "idle_tick": idle}
        if due:
            for i in range(due):
                entry = RedBeatSchedulerEntry.from_key(f"{prefix}s{i}", app=app)
                entry.reschedule(last_run_at=app.now() - timedelta(hours=1, minutes=1))
            result["burst"] = burst(beat, recorder, due, burst_cap)
        beat.close()
        return result


@contextmanager
def redbeat_keys(app: Celery, redis_url: str) -> Iterator[str]:
    """Point RedBeat on `app` at `redis_url`, its keys under a prefix of their own
    (yielded), and delete them all afterwards."""
    from redbeat.schedulers import get_redis

    prefix = f"nightshift-bench-{uuid.uuid4().hex[:8]}:"
    app.conf.update(redbeat_redis_url=redis_url, redbeat_key_prefix=prefix, redbeat_lock_key=None)
    try:
        yield prefix
    finally:
        client = get_redis(app)
        keys = list(client.scan_iter(match=f"{prefix}*", count=5_000))
        for start in range(0, len(keys), 5_000):
            client.delete(*keys[start : start + 5_000])


# -- measuring and printing ---------------------------------------------------------


def timed(fn: Callable[[], object], times: int) -> dict[str, float]:
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    samples.sort()
    return {
        "median_ms": statistics.median(samples) * 1000,
        "p99_ms": samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1000,
        "n": times,
    }


def rate(burst: dict[str, float]) -> float:
    return burst["sent"] / burst["seconds"] if burst["seconds"] else float("inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)))
    parser.add_argument("--burst", type=int, default=2_000, help="due entries at the largest size")
    parser.add_argument("--burst-cap", type=float, default=20.0, help="seconds a peer may take")
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("NIGHTSHIFT_BENCH_REDIS_URL", "redis://127.0.0.1:6379/15"),
        help="for RedBeat (keys under a unique prefix, deleted afterwards)  "
        "[env NIGHTSHIFT_BENCH_REDIS_URL]",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="nightshift start-up and burst runs (median)"
    )
    parser.add_argument(
        "--postgres-url",
        default=POSTGRES_URL,
        help="for our start-up on PostgreSQL (a database of its own, dropped afterwards)  "
        "[env NIGHTSHIFT_TEST_POSTGRES_URL]",
    )
    parser.add_argument("--no-redbeat", action="store_true")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    largest = max(sizes)
    report: dict[str, Any] = {}
    print("sends are counted by a recording app.send_task on every side: no broker is measured")
    print("idle tick, median (p99), ms:")
    print(f"{'schedules':>10}  {'nightshift':>20}  {'celery default':>20}  {'redbeat':>20}")
    for n in sizes:
        due = args.burst if n == largest else 0
        peer_ticks = 5 if n >= 10_000 else 50
        row = {
            "nightshift": bench_ours_repeated(
                n, due, 2_000 if n <= 10_000 else 1_000, args.repeat if n == largest else 1
            ),
            "celery": bench_celery(n, due, peer_ticks, args.burst_cap),
            "redbeat": None
            if args.no_redbeat
            else bench_redbeat(n, due, 200, args.burst_cap, args.redis_url),
        }
        report[n] = row
        cells = [
            f"{r['idle_tick']['median_ms']:.4f} ({r['idle_tick']['p99_ms']:.3f})" if r else "-"
            for r in row.values()
        ]
        print(f"{n:>10}  " + "  ".join(f"{c:>20}" for c in cells))
    print_summary(report[largest], largest, args.burst)
    postgres_url = None if args.no_postgres else args.postgres_url
    report["startups"] = startups(largest, args.burst, args.repeat, postgres_url)
    for name, runs in report["startups"].items():
        print(
            f"  start-up, nightshift on {name}: {statistics.median(runs):.2f} s (median of {runs})"
        )
    if report[largest]["redbeat"] is None:
        print("RedBeat: not measured (pip install -e '.[bench]' to include it)")
    if args.json:
        print(json.dumps(report, indent=2, default=str))


def startups(n: int, due: int, repeat: int, postgres_url: str | None) -> dict[str, list[float]]:
    """Our start-up at `n` on PostgreSQL (unless `postgres_url` is None) and on SQLite
    with schedules edited apart, `repeat` times each."""
    found: dict[str, list[float]] = {}
    if postgres_url is not None:
        with postgres(postgres_url) as url:
            found["postgresql"] = [
                round(start_ours(n, due, url, edited_apart=False), 3) for _ in range(repeat)
            ]
    found["sqlite, schedules edited apart"] = [
        round(start_ours(n, due, None, edited_apart=True), 3) for _ in range(repeat)
    ]
    return found


def print_summary(row: dict[str, Any], size: int, burst: int) -> None:
    ours = row["nightshift"]
    peers = {name: r for name, r in row.items() if name != "nightshift" and r}
    print(f"\nat {size} schedules:")
    print(
        "  idle tick ratio: "
        + ", ".join(
            f"{name}/nightshift {r['idle_tick']['median_ms'] / ours['idle_tick']['median_ms']:,.0f}x"
            for name, r in peers.items()
        )
    )
    print(
        f"  reload poll (nightshift, once per reload_seconds): median {ours['reload_poll']['median_ms']:.3f} ms"
    )
    print(
        f"  start-up (construct + first tick): nightshift {ours['startup_s']:.2f} s "
        f"(median of {ours.get('startup_runs_s', [])}); "
        + ", ".join(
            f"{name} {r['startup_s']:.2f} s ({r['startup_s'] / ours['startup_s']:.1f}x)"
            for name, r in peers.items()
        )
    )
    if "burst" not in ours:
        return
    mine = rate(ours["burst"])
    print(
        f"  {burst} due at once: nightshift {mine:,.0f} sends/s "
        f"({ours['burst']['sent']} in {ours['burst']['seconds']:.3f} s, median of "
        f"{ours.get('burst_runs_s', [])}; one tick, run rows and fire records written)"
    )
    for name, r in peers.items():
        theirs = rate(r["burst"]) or float("nan")
        capped = ", capped" if r["burst"]["sent"] < burst else ""
        if r["burst"].get("sent_before_burst"):
            capped += f"; it also sent {r['burst']['sent_before_burst']} before the burst"
        print(
            f"  {'':>{len(str(burst))}} {'':8} {name} {theirs:,.1f} sends/s "
            f"({r['burst']['sent']} in {r['burst']['seconds']:.1f} s{capped}); "
            f"nightshift/{name} {mine / theirs:,.0f}x"
        )


if __name__ == "__main__":
    main()
