"""`nightshift schedules apply` of a 50,000-schedule file, against RedBeat.

    .venv/bin/python -m bench.schedules_apply_bench             # 50,000, 3 rounds
    .venv/bin/python -m bench.schedules_apply_bench --size 5000 --rounds 1

Each round, on SQLite and on PostgreSQL (a database of its own, `--postgres-url`,
dropped afterwards), with an empty schedules table:
- `create`: `schedules apply FILE` (the command, in-process through click's
  CliRunner) creates every schedule;
- `unchanged`: the same command again: it reads every applied schedule, finds no
  difference and writes nothing;
- `one edited`: the file with one schedule's cron changed: one update.

The peer is RedBeat (`pip install -e '.[bench]'`, `--redis-url`, keys under a unique
prefix, deleted afterwards), where schedules are added at run time by saving a
`RedBeatSchedulerEntry` each: `create` saves every entry; RedBeat keeps no record of
which file an entry came from, so putting a file in place again means saving every
entry again (`unchanged`, `one edited`). Both sides get the same crons (`M H * * *`)
and heartbeats (every 5 to 11 minutes); ours also parse and check a TOML file, name
a time zone per schedule, and print their diff.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

from celery import Celery
from click.testing import CliRunner
from sqlalchemy import delete

from bench.beat_bench import redbeat_keys
from bench.runs_bench import POSTGRES_URL, postgres
from memory.engine import open_engine
from schedules.tables import schedules as schedules_table
from workers import schema
from workers.cli import main_group

ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo")
PHASES = ("create", "unchanged", "one edited")


def heartbeat_minutes(i: int) -> int | None:
    """Schedule `i`'s heartbeat period, if it is one of the 30% heartbeats."""
    return 5 + i % 7 if i % 10 >= 7 else None


def cron_fields(i: int, edited: int | None = None) -> tuple[int, int]:
    """Schedule `i`'s cron (`minute hour * * *`); the edited one a minute later."""
    return (i + 1) % 60 if i == edited else i % 60, i % 24


def edited_of(size: int) -> int:
    """The schedule the `one edited` phase changes: a cron, in the middle."""
    return size // 2 - size // 2 % 10


def schedule_file(path: Path, size: int, edited: int | None = None) -> Path:
    """`size` schedules: 70% crons in four zones, 30% heartbeats."""
    parts = []
    for i in range(size):
        every = heartbeat_minutes(i)
        minute, hour = cron_fields(i, edited)
        when = f'heartbeat = "{every}m"' if every else f'cron = "{minute} {hour} * * *"'
        parts.append(
            f'[[schedule]]\nname = "s{i:06d}"\nagent = "feed-watcher"\ntenant = "acme"\n'
            f'{when}\ntimezone = "{ZONES[i % 4]}"\n\n'
        )
    path.write_text("".join(parts))
    return path


def nightshift_phases(url: str, files: dict[str, Path], size: int) -> dict[str, float]:
    def apply(path: Path, changed: int) -> float:
        started = time.perf_counter()
        result = CliRunner().invoke(
            main_group, ["--database-url", url, "schedules", "apply", str(path)]
        )
        took = time.perf_counter() - started
        assert result.exit_code == 0, result.output[-2000:]
        summary = f"{changed} changed, {size - changed} unchanged"
        assert result.output.rstrip().endswith(summary), result.output[-2000:]
        return took

    engine = open_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(delete(schedules_table))
    finally:
        engine.dispose()
    return {
        "create": apply(files["create"], size),
        "unchanged": apply(files["create"], 0),
        "one edited": apply(files["one edited"], 1),
    }


def redbeat_phases(redis_url: str, size: int) -> dict[str, float]:
    from celery.schedules import crontab, schedule
    from redbeat import RedBeatSchedulerEntry

    def entries(app: Any, edited: int | None) -> list[Any]:
        made = []
        for i in range(size):
            every = heartbeat_minutes(i)
            minute, hour = cron_fields(i, edited)
            when = (
                schedule(timedelta(minutes=every), app=app)
                if every
                else crontab(minute=minute, hour=hour, app=app)
            )
            made.append(RedBeatSchedulerEntry(f"s{i:06d}", "run", when, app=app))
        return made

    def save(app: Any, edited: int | None = None) -> float:
        started = time.perf_counter()
        for entry in entries(app, edited):
            entry.save()
        return time.perf_counter() - started

    app = Celery("bench", broker="memory://", set_as_current=False)
    with redbeat_keys(app, redis_url):
        return {
            "create": save(app),
            "unchanged": save(app),
            "one edited": save(app, edited_of(size)),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres-url", default=POSTGRES_URL)
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--no-redbeat", action="store_true")
    args = parser.parse_args()
    try:
        import redbeat  # noqa: F401
    except ImportError:
        args.no_redbeat = True
        print("RedBeat: not measured (pip install -e '.[bench]' to include it)")
    with tempfile.TemporaryDirectory() as tmp, postgres(args.postgres_url) as pg_url:
        files = {
            "create": schedule_file(Path(tmp) / "all.toml", args.size),
            "one edited": schedule_file(Path(tmp) / "edited.toml", args.size, edited_of(args.size)),
        }
        sides: dict[str, Callable[[], dict[str, float]]] = {}
        for dialect, url in (
            ("nightshift sqlite", f"sqlite:///{Path(tmp) / 'apply.db'}"),
            ("nightshift postgresql", pg_url),
        ):
            engine = open_engine(url)
            schema.upgrade(engine)
            engine.dispose()
            sides[dialect] = lambda url=url: nightshift_phases(url, files, args.size)  # type: ignore[misc]
        if not args.no_redbeat:
            sides["redbeat"] = lambda: redbeat_phases(args.redis_url, args.size)
        samples: dict[str, dict[str, list[float]]] = {
            side: {phase: [] for phase in PHASES} for side in sides
        }
        for _ in range(args.rounds):  # by turns, so the machine's load falls on every side
            for side, measure in sides.items():
                for phase, took in measure().items():
                    samples[side][phase].append(took)
    report(samples, args.size, args.rounds)


def report(samples: dict[str, dict[str, list[float]]], size: int, rounds: int) -> None:
    median = {
        side: {phase: statistics.median(ts) for phase, ts in phases.items()}
        for side, phases in samples.items()
    }
    print(f"{size:,} schedules, seconds, median of {rounds} (the rounds in brackets):")
    print(f"{'':>24}" + "".join(f"{phase:>24}" for phase in PHASES))
    for side, phases in samples.items():
        cells = "".join(
            f"{median[side][p]:>8.2f} {str([round(t, 2) for t in phases[p]]):>15}" for p in PHASES
        )
        print(f"{side:>24}{cells}")
    if "redbeat" in median:
        for side in (s for s in median if s != "redbeat"):
            ratios = "   ".join(
                f"{p} {median['redbeat'][p] / median[side][p]:.1f}x" for p in PHASES
            )
            print(f"RedBeat time / {side} time: {ratios}")


if __name__ == "__main__":
    main()
