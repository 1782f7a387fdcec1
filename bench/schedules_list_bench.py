"""`nightshift schedules list` at 50,000 schedules, on SQLite and PostgreSQL.

    .venv/bin/python -m bench.schedules_list_bench              # 50,000, 3 rounds
    .venv/bin/python -m bench.schedules_list_bench --size 5000 --rounds 1

For each database it times, by turns, `rounds` times each:
- `list`: the command itself (`schedules list --json`, in-process through click's
  CliRunner), which computes each next fire from the rows it has already read;
- `per-row`: what `list` did before b0150b1 was fixed (see CHANGELOG): read all schedules, then
  `Schedules.next(name, 1)` for each, which reads that schedule from the database
  again: one query per row.
and prints the median of each and their ratio. Schedules are a mix of crons in a
few zones, heartbeats and events, inserted in bulk; PostgreSQL gets its own
database (`--postgres-url`), dropped afterwards.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner

from bench.beat_bench import insert_rows, stored_row
from bench.runs_bench import POSTGRES_URL, postgres
from memory.engine import open_engine
from schedules.api import Schedules
from schedules.definition import Cron, Event, Heartbeat, Schedule, Trigger
from workers import schema
from workers.cli import main_group

NOW = datetime(2026, 3, 2, 12, tzinfo=UTC)
ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo")


def trigger_of(i: int) -> Trigger:
    if i % 10 == 9:
        return Event()
    if i % 10 >= 7:
        return Heartbeat(timedelta(minutes=5 + i % 7), timezone=ZONES[i % 4])
    return Cron(f"{i % 60} {i % 24} * * *", ZONES[i % 4])


def fill(url: str, size: int) -> None:
    engine = open_engine(url)
    schema.upgrade(engine)
    rows = [
        stored_row(
            Schedule(name=f"s{i:06d}", agent="bench", tenant="acme", trigger=trigger_of(i)),
            NOW - timedelta(hours=1),
            NOW - timedelta(minutes=1) if i % 2 else None,
        )
        for i in range(size)
    ]
    insert_rows(engine, rows)
    engine.dispose()


def list_command(url: str, size: int) -> Callable[[], None]:
    def run() -> None:
        result = CliRunner().invoke(
            main_group, ["--database-url", url, "schedules", "list", "--json"]
        )
        assert result.exit_code == 0, result.output
        assert len(json.loads(result.stdout)) == size

    return run


def per_row(url: str, size: int) -> Callable[[], None]:
    def run() -> None:
        engine = open_engine(url)
        api = Schedules(engine, runs=None)  # type: ignore[arg-type]  # reads only
        found = [api.next(a.name, 1) if not a.paused else [] for a in api.all()]
        assert len(found) == size
        engine.dispose()

    return run


def measure(url: str, size: int, rounds: int) -> dict[str, float]:
    ways = {"list": list_command(url, size), "per-row": per_row(url, size)}
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(rounds):
        for name, way in ways.items():
            started = time.perf_counter()
            way()
            times[name].append(time.perf_counter() - started)
    result = {name: statistics.median(ts) for name, ts in times.items()}
    print(
        f"  rounds: list {[round(t, 2) for t in times['list']]} s, "
        f"per-row {[round(t, 2) for t in times['per-row']]} s"
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgres-url", default=POSTGRES_URL)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, postgres(args.postgres_url) as pg_url:
        for dialect, url in (
            ("sqlite", f"sqlite:///{Path(tmp) / 'list.db'}"),
            ("postgresql", pg_url),
        ):
            fill(url, args.size)
            print(f"{dialect}, {args.size:,} schedules, median of {args.rounds}:")
            found = measure(url, args.size, args.rounds)
            print(
                f"  list {found['list']:.2f} s   per-row (before) {found['per-row']:.2f} s   "
                f"ratio {found['per-row'] / found['list']:.1f}x"
            )


if __name__ == "__main__":
    main()
