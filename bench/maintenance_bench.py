"""Consolidate, expire and decay on PostgreSQL at two sizes, and how their cost grows.

    .venv/bin/python -m bench.maintenance_bench                  # 100,000 and 1,000,000
    .venv/bin/python -m bench.maintenance_bench --memories 200000   # 20,000 and 200,000
    .venv/bin/python -m bench.maintenance_bench --repeat 3 --repeat-large 1   # the defaults

Each size gets a fresh database, bulk-loaded with COPY (the full-text GIN index is
built after the load, as a restore would, from the schema's own definition). The data is reproducible: 100 tenants
of 2 agents and as many users as keep ~100 memories per scope (the same density
at both sizes, so both do the same work per memory); about 8% exact duplicates (same text up to case), 3%
near-duplicates (one word added), 2% same-key races, 20% episodes (half of them
old enough to compact), 10% unreinforced for 120 days, 2% past `valid_to`, and 5%
down-voted two months ago (under the load bar once decayed). Every pass runs as the nightly job would: tenant by tenant,
each tenant in its own transaction, all set-based SQL.

The growth ratio is (seconds per memory at the large size) / (seconds per memory
at the small size): 1.0 is linear, below 1 better than linear.
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

from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from memory.engine import open_engine
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
STEADY = "consolidate again"  # a second pass: what a nightly run costs once the backlog is gone
COLUMNS = (
    "id",
    "tenant",
    "user_id",
    "agent_id",
    "kind",
    "key",
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


@contextmanager
def fresh_database() -> Iterator[str]:
    name = f"ns_bench_maint_{uuid.uuid4().hex[:10]}"
    admin = create_engine(
        make_url(ADMIN_URL).set(drivername="postgresql+psycopg2"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(ADMIN_URL).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


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
        memory_id = str(uuid.UUID(int=rng.getrandbits(128)))
        values = (
            memory_id,
            tenant,
            user,
            agent,
            kind.value,
            key,
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


def measure(count: int) -> dict[str, float]:
    with fresh_database() as url:
        loaded = load(url, count)
        print(f"  {count:>9,} memories loaded with COPY in {loaded:.1f}s", flush=True)
        engine = open_engine(url)
        out: dict[str, float] = {}
        for job in (*JOBS, STEADY):
            summary = run_job(engine, job.split()[0], now=NOW)
            out[job] = summary.seconds
            shown = {k: v for k, v in sorted(summary.counts.items()) if k in _SHOWN}
            print(f"  {count:>9,} {job:<18} {summary.seconds:7.2f}s  {shown}", flush=True)
        engine.dispose()
        return out


_SHOWN = {"merged", "compacted", "summaries", "skipped", "expired", "decayed", "hot_summaries"}


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    return {job: statistics.median(r[job] for r in runs) for job in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--memories", type=int, default=1_000_000, help="the large size; the small is a tenth"
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs at each size (fresh data each); medians shown"
    )
    parser.add_argument(
        "--repeat-large", type=int, default=1, help="runs at the large size (each reloads it)"
    )
    args = parser.parse_args()
    large = args.memories
    small = max(large // 10, 1000)
    print(f"maintenance on PostgreSQL: {small:,} and {large:,} memories, {TENANTS} tenants")
    at_small = median_of([measure(small) for _ in range(args.repeat)])
    at_large = median_of([measure(large) for _ in range(args.repeat_large)])
    print()
    print(f"medians of {args.repeat} run(s) at {small:,} and {args.repeat_large} at {large:,}")
    print(
        f"{'job':<18} {small:>10,} {large:>12,}   growth ratio (per memory, 1.0 = linear)   target <60s"
    )
    for job in (*JOBS, STEADY):
        growth = (at_large[job] / large) / (at_small[job] / small)
        verdict = "ok" if at_large[job] < 60 and growth <= 1.2 else "MISSED"
        print(
            f"{job:<18} {at_small[job]:>9.2f}s {at_large[job]:>11.2f}s   {growth:>6.2f}x   {verdict}"
        )


if __name__ == "__main__":
    main()
