"""Consolidate, expire and decay on PostgreSQL at two sizes, and how their cost grows.

    .venv/bin/python -m bench.maintenance_bench                  # 100,000 and 1,000,000
    .venv/bin/python -m bench.maintenance_bench --memories 200000   # 20,000 and 200,000
    .venv/bin/python -m bench.maintenance_bench --repeat 3          # the default (9 at the small size)

Each size is bulk-loaded once with COPY into a template database (the full-text
GIN index is built after the load, as a restore would, from the schema's own
definition). The data is reproducible: 100 tenants of 2 agents and as many users
as keep ~100 memories per scope (the same density at both sizes, so both do the
same work per memory); about 8% exact duplicates (same text up to case), 3%
near-duplicates (one word added), 2% same-key races, 20% episodes (half of them
old enough to compact), 10% unreinforced for 120 days, 2% past `valid_to`, and 5%
down-voted two months ago (under the load bar once decayed). Ids are version 7
UUIDs in load order, as the writer makes them in write order. Every pass runs as
the nightly job would, all set-based SQL.

Every job starts from the same place at both sizes: a fresh copy of the loaded
database (so none of its pages is in PostgreSQL's buffer cache) and a CHECKPOINT
(so each job writes the full-page images a nightly pass writes, and starts with
no other pass's dirty pages to flush). Without that, the small size would be
measured with its whole table in `shared_buffers` (128 MB by default holds the
100k table, not the 1M one) and the large one without: a comparison of caches,
not of cost per memory. "consolidate again" runs on a copy taken after a first
consolidation: what a nightly run costs once the backlog is gone.

The growth ratio is (seconds per memory at the large size) / (seconds per memory
at the small size), from the medians: 1.0 is linear, below 1 better than linear.
The small size runs three times as often as the large: its jobs take about a
second, where a noisy moment moves a single timing by a tenth. The WAL each job
writes is printed too, and its growth per memory: a count of the work done
(rows changed, index entries, full-page images) that no noise moves.
"""

from __future__ import annotations

import argparse
import io
import os
import random
import statistics
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url

from memory.engine import open_engine
from memory.folding import folded_key
from memory.records import SOURCE_CONFIDENCE, Kind, Source, content_hash
from workers import schema
from workers.maintenance import run_job

ADMIN_URL = os.environ.get(
    "NIGHTSHIFT_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
NOW = datetime(2026, 12, 1, tzinfo=UTC)
TENANTS = 100
MEMORIES_PER_SCOPE = 100
JOBS = ("consolidate", "expire", "decay")
SMALL_REPEATS = 3  # the small size runs 3x as often: its sub-second jobs are the noisier
STEADY = "consolidate again"  # a second pass: what a nightly run costs once the backlog is gone
COLUMNS = (
    "id",
    "tenant",
    "user_id",
    "agent_id",
    "kind",
    "key",
    "key_folded",
    "content",
    "content_hash",
    "status",
    "source",
    "confidence",
    "idempotency_key",
    "score",
    "created_at",
    "valid_from",
    "valid_to",
    "last_reinforced_at",
)
_WORDS = [f"w{i}" for i in range(5000)]
_WEIGHTS = [1.0 / (r + 1) for r in range(len(_WORDS))]


def _admin() -> Engine:
    url = make_url(ADMIN_URL).set(drivername="postgresql+psycopg2")
    return create_engine(url, isolation_level="AUTOCOMMIT")


@contextmanager
def fresh_database(template: str | None = None) -> Iterator[str]:
    """A new database (a copy of `template`, a database URL, if given); dropped after."""
    name = f"ns_bench_maint_{uuid.uuid4().hex[:10]}"
    copy = f' TEMPLATE "{make_url(template).database}"' if template else ""
    admin = _admin()
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"{copy}'))
    try:
        yield make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


_FIRST_MS = int((NOW - timedelta(days=365)).timestamp() * 1000)


def _version_7(ms: int, rng: random.Random) -> str:
    """The id the writer gives a row written at Unix millisecond `ms`
    (`memory.writing.new_id`), its random bits from `rng` so the data is reproducible."""
    bits = (ms << 80) | (0x7 << 76) | (rng.getrandbits(12) << 64) | (0b10 << 62)
    return str(uuid.UUID(int=bits | rng.getrandbits(62)))


def rows(count: int, seed: int = 11) -> Iterator[str]:
    """COPY text lines for `count` memories (tab-separated, \\N for NULL)."""
    rng = random.Random(seed)
    users = max(1, count // (TENANTS * 2 * MEMORIES_PER_SCOPE))
    recent: list[tuple[str, str, str, str]] = []  # (tenant, user, agent, text) to duplicate
    for n in range(count):
        roll = rng.random()
        if recent and roll < 0.08:
            tenant, user, agent, base = rng.choice(recent)
            content = base.upper() if rng.random() < 0.5 else "  ".join(base.split())
        elif recent and roll < 0.11:
            tenant, user, agent, base = rng.choice(recent)
            content = f"{base} {rng.choice(_WORDS)}"
        else:
            tenant = f"t{rng.randrange(TENANTS)}"
            user = f"u{rng.randrange(users)}"
            agent = f"a{rng.randrange(2)}"
            content = " ".join(rng.choices(_WORDS, weights=_WEIGHTS, k=rng.randint(10, 16)))
            recent.append((tenant, user, agent, content))
            if len(recent) > 2000:
                recent.pop(rng.randrange(len(recent)))
        kind = (
            Kind.EPISODE
            if rng.random() < 0.2
            else (Kind.PREFERENCE if rng.random() < 0.1 else Kind.FACT)
        )
        key = f"slot.{rng.randrange(3)}" if kind is Kind.FACT and rng.random() < 0.02 else ""
        age = rng.uniform(0, 30)
        if kind is Kind.EPISODE and rng.random() < 0.5:
            age = rng.uniform(35, 80)
        reinforced = age
        score = 1.0
        fate = rng.random()
        if fate < 0.10:
            reinforced = age = 120.0
        elif fate < 0.15:
            score, reinforced = 0.3, max(age, 60.0)
        created = NOW - timedelta(days=max(age, reinforced))
        valid_to = (NOW - timedelta(days=1)).isoformat() if 0.15 <= fate < 0.17 else "\\N"
        source = Source.OBSERVED
        memory_id = _version_7(_FIRST_MS + n, rng)
        values = (
            memory_id,
            tenant,
            user,
            agent,
            kind.value,
            key,
            folded_key(key),
            content,
            content_hash(content),
            "active",
            source.value,
            str(SOURCE_CONFIDENCE[source]),
            f"bench:{n}",
            str(score),
            created.isoformat(),
            created.isoformat(),
            valid_to,
            (NOW - timedelta(days=reinforced)).isoformat(),
        )
        yield "\t".join(values) + "\n"


def load(url: str, count: int) -> float:
    started = time.monotonic()
    engine = open_engine(url)
    schema.upgrade(engine)
    with engine.begin() as conn:  # rebuilt after the load exactly as the schema defines it
        fts_index = conn.exec_driver_sql(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_ns_memories_fts'"
        ).scalar_one()
        conn.exec_driver_sql("DROP INDEX ix_ns_memories_fts")
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        buffer = io.StringIO()
        for n, line in enumerate(rows(count), 1):
            buffer.write(line)
            if n % 100_000 == 0 or n == count:
                buffer.seek(0)
                cursor.copy_expert(f"COPY ns_memories ({', '.join(COLUMNS)}) FROM STDIN", buffer)
                buffer = io.StringIO()
        cursor.execute(fts_index)
        raw.commit()
    finally:
        raw.close()
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM ANALYZE ns_memories")
    engine.dispose()
    return time.monotonic() - started


_CHECKPOINTS = "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter"
"""Checkpoints so far (the whole server's). One during a job makes every page the job
touches again log a full-page image again: past `max_wal_size` (1 GB by default) of
WAL, a job pays that for the checkpoints its own WAL brought on."""


def run_one(url: str, job: str, label: str = "") -> Timing:
    """Run `job` on the database at `url` between two CHECKPOINTs; print and return its
    seconds, its seconds with the second CHECKPOINT (its dirty pages written), and the
    WAL it wrote (a count of work, free of the machine's noise)."""
    engine = open_engine(url)
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("CHECKPOINT")
            wal_at = conn.exec_driver_sql("SELECT pg_current_wal_lsn()").scalar_one()
            checkpoints = conn.exec_driver_sql(_CHECKPOINTS).scalar_one()
            summary = run_job(engine, job, now=NOW)
            checkpoints = conn.exec_driver_sql(_CHECKPOINTS).scalar_one() - checkpoints
            started = time.monotonic()
            conn.exec_driver_sql("CHECKPOINT")
            flushed = summary.seconds + time.monotonic() - started
            wal = float(
                conn.exec_driver_sql(
                    "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %(at)s)", {"at": wal_at}
                ).scalar_one()
            )
    finally:
        engine.dispose()
    shown = {k: v for k, v in sorted(summary.counts.items()) if k in _SHOWN}
    print(
        f"    {label or job:<18} {summary.seconds:7.2f}s  flushed {flushed:7.2f}s"
        f"  WAL {wal / 1e6:7.1f} MB  checkpoints during it {checkpoints}  {shown}",
        flush=True,
    )
    return Timing(summary.seconds, flushed, wal)


class Timing(NamedTuple):
    seconds: float
    flushed: float  # seconds, with the job's dirty pages written by the CHECKPOINT after it
    wal: float  # bytes


def measure(count: int, repeat: int) -> dict[str, Timing]:
    """Per job, the medians at `count` memories over `repeat` fresh copies."""
    runs: dict[str, list[Timing]] = {job: [] for job in (*JOBS, STEADY)}
    with fresh_database() as template:
        loaded = load(template, count)
        print(f"  {count:,} memories loaded with COPY in {loaded:.1f}s", flush=True)
        for _ in range(repeat):
            for job in JOBS:
                with fresh_database(template) as url:
                    runs[job].append(run_one(url, job))
                    if job == "consolidate":
                        with fresh_database(url) as again:
                            runs[STEADY].append(run_one(again, "consolidate", STEADY))
    return {
        job: Timing(*(statistics.median(t[i] for t in r) for i in range(3)))
        for job, r in runs.items()
    }


_SHOWN = {"merged", "compacted", "summaries", "skipped", "expired", "decayed", "hot_summaries"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--memories", type=int, default=1_000_000, help="the large size; the small is a tenth"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs of each job at the large size (3x that at the small); medians shown",
    )
    args = parser.parse_args()
    large = args.memories
    small = max(large // 10, 1000)
    small_repeat = args.repeat * SMALL_REPEATS
    print(f"maintenance on PostgreSQL: {small:,} and {large:,} memories, {TENANTS} tenants")
    at_small = measure(small, small_repeat)
    at_large = measure(large, args.repeat)
    print()
    print(
        f"medians of {small_repeat} runs at {small:,} and {args.repeat} at {large:,};"
        " target < 60 s, growth per memory <= 1.2 (1.0 is linear)"
    )
    print(
        f"{'job':<18} {small:>10,} {large:>12,}   growth  | writes flushed:"
        f" {small:>9,} {large:>11,}   growth  | WAL per memory growth"
    )
    for job in (*JOBS, STEADY):
        s_, l_ = at_small[job], at_large[job]
        per = small / large
        growth, growth_all = l_.seconds / s_.seconds * per, l_.flushed / s_.flushed * per
        growth_wal = l_.wal / s_.wal * per if s_.wal else float("nan")
        verdict = "ok" if l_.seconds < 60 and growth_all <= 1.2 else "MISSED"
        print(
            f"{job:<18} {s_.seconds:>9.2f}s {l_.seconds:>11.2f}s   {growth:>5.2f}x |"
            f"                {s_.flushed:>8.2f}s {l_.flushed:>10.2f}s   {growth_all:>5.2f}x |"
            f" {growth_wal:>5.2f}x  {verdict}"
        )


if __name__ == "__main__":
    main()
