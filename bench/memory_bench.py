"""Memory store benchmark on PostgreSQL, against LangGraph's PostgresStore in the same run.

    .venv/bin/python bench/memory_bench.py                      # 1,000,000 memories
    .venv/bin/python bench/memory_bench.py --memories 100000    # a quicker look

(a) writer apply throughput — `Store.apply` in batches as the memory writer runs it
    (gate, idempotency, supersession, full-text index, audit, receipt) — next to
    LangGraph's `PostgresStore.batch` of PutOps and a raw COPY of the same rows.
    Like with like: the same candidates in the same batches, one transaction per
    batch on each side, the two alternating batch by batch so that both meet the
    same machine noise; LangGraph stores each candidate as one JSON row with
    `index=False` (no text index, no audit, no receipt, no gate).
(b) `Store.load` p50/p99 over N memories in 10,000 scopes for common and rare
    words, next to LangGraph's `PostgresStore.search` on the same data (which
    ignores the query text without an embedding index), plus the PostgreSQL
    generic-plan check for prepared full-text queries. After the bulk load both
    tables get what an operator runs after a restore (VACUUM (ANALYZE)); loads and
    searches alternate, and the timing is repeated (`--repeats`).

Needs the `bench` extra (`pip install -e '.[bench]'`) and a PostgreSQL server
(`--postgres-url`, default the local one); it creates and drops its own databases.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import psycopg  # noqa: E402
from langgraph.store.base import PutOp  # noqa: E402
from langgraph.store.postgres import PostgresStore  # noqa: E402
from sqlalchemy import Engine, event  # noqa: E402

from bench.memory_data import (  # noqa: E402
    COLUMNS,
    COMMON,
    RARE,
    _libpq,
    candidates,
    copy_langgraph,
    copy_memories,
    fresh_database,
    rows,
    scope_of,
)
from memory import fulltext, lookups  # noqa: E402
from memory.dialect import sent_statement  # noqa: E402
from memory.engine import open_engine  # noqa: E402
from memory.pending import WRITE_ALL_PREPARED  # noqa: E402
from memory.queries import to_values  # noqa: E402
from memory.records import Candidate, Status  # noqa: E402
from memory.store import Store  # noqa: E402
from memory.tables import memories  # noqa: E402
from memory.writing import new_memory  # noqa: E402
from workers import schema  # noqa: E402


def pct(samples: Sequence[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def chunks(items: Sequence[Candidate], size: int) -> list[Sequence[Candidate]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


# -- (a) write throughput ----------------------------------------------------------------


class StatementClock:
    """Time each statement nightshift's engines send, from the driver call to its end
    (round trip included), summed by its first word, or for a prepared statement by
    its name: where an apply's time goes."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = {}
        self.sent: dict[str, int] = {}
        self._started: dict[int, float] = {}

    def __enter__(self) -> StatementClock:
        event.listen(Engine, "before_cursor_execute", self._before)
        event.listen(Engine, "after_cursor_execute", self._after)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(Engine, "before_cursor_execute", self._before)
        event.remove(Engine, "after_cursor_execute", self._after)

    def _before(self, conn: object, cursor: object, statement: str, *args: object) -> None:
        self._started[id(cursor)] = time.perf_counter()

    def _after(self, conn: object, cursor: object, statement: str, *args: object) -> None:
        word, *rest = sent_statement(statement).split(None, 2)
        if word.upper() in ("EXECUTE", "PREPARE"):
            word = rest[0].split("(", 1)[0]
        elapsed = time.perf_counter() - self._started.pop(id(cursor))
        self.spent[word] = self.spent.get(word, 0.0) + elapsed
        self.sent[word] = self.sent.get(word, 0) + 1


def write_interleaved(
    ns_url: str, lg_url: str, batches: list[Sequence[Candidate]], tag: str, clock: StatementClock
) -> tuple[float, float]:
    """Seconds spent by `Store.apply` and by LangGraph's `batch` on the same batches.

    The two run batch by batch in turn (which one goes first alternates), each on
    its own fresh database, so both see the same moments of a noisy machine.
    `clock` sums the time of nightshift's statements (LangGraph's driver is not
    SQLAlchemy's, so it is not counted).
    """
    engine = open_engine(ns_url)
    schema.upgrade(engine)
    store = Store(engine)
    spent = [0.0, 0.0]
    with PostgresStore.from_conn_string(_libpq(lg_url)) as lg, clock:
        lg.setup()

        def ns_write(i: int, batch: Sequence[Candidate]) -> None:
            store.apply(batch, handle=f"bench:{tag}:{i}", actor="bench")

        def lg_write(i: int, batch: Sequence[Candidate]) -> None:
            lg.batch(
                [
                    PutOp(
                        (c.scope.tenant, c.scope.user, c.scope.agent),
                        c.effective_idempotency_key(),
                        c.to_json(),
                        index=False,
                    )
                    for c in batch
                ]
            )

        for i, batch in enumerate(batches):
            order = ((0, ns_write), (1, lg_write))
            for which, write in order if i % 2 == 0 else order[::-1]:
                start = time.perf_counter()
                write(i, batch)
                spent[which] += time.perf_counter() - start
    engine.dispose()
    return spent[0], spent[1]


def write_copy(url: str, items: Sequence[Candidate]) -> float:
    engine = open_engine(url)
    schema.upgrade(engine)
    engine.dispose()
    now = datetime.now(UTC)
    # A slot holds one active value: the last one written to it; the others as superseded.
    last = {(c.scope, c.key): i for i, c in enumerate(items) if c.key}

    def status(i: int, c: Candidate) -> Status:
        return Status.SUPERSEDED if c.key and last[(c.scope, c.key)] != i else Status.ACTIVE

    prepared = [
        tuple(to_values(new_memory(c, c.kind, status(i, c), now, None))[k] for k in COLUMNS)
        for i, c in enumerate(items)
    ]
    start = time.perf_counter()
    copy_memories(url, iter(prepared))
    return time.perf_counter() - start


def bench_writes(admin: str, count: int, batch: int, rounds: int) -> None:
    items = candidates(count, scopes=20, batch=batch)
    batches = chunks(items, batch)
    rates: dict[str, list[float]] = {"nightshift": [], "langgraph": [], "copy": []}
    ratios = []
    clock = StatementClock()
    for r in range(rounds):
        with fresh_database(admin) as ns_url, fresh_database(admin) as lg_url:
            ns_seconds, lg_seconds = write_interleaved(ns_url, lg_url, batches, str(r), clock)
        rates["nightshift"].append(count / ns_seconds)
        rates["langgraph"].append(count / lg_seconds)
        ratios.append(lg_seconds / ns_seconds)
        with fresh_database(admin) as url:
            rates["copy"].append(count / write_copy(url, items))
    med = {k: statistics.median(v) for k, v in rates.items()}
    med_ratio = statistics.median(ratios)
    print(
        f"\n(a) write throughput: {count} candidates, one run's batch of {batch} at a time over"
        f" 20 scopes, {rounds} rounds; nightshift and LangGraph alternate batch by batch,"
        " each into its own fresh database, committing every batch"
    )
    for name, label in (
        ("nightshift", "nightshift Store.apply (gate+idempotency+supersession+fts+audit)"),
        ("langgraph", "LangGraph PostgresStore.batch(PutOp)"),
        ("copy", "raw COPY into ns_memories"),
    ):
        print(f"  {label:<68} median {med[name]:>9.0f} rows/s")
    print(
        f"  ratio nightshift / LangGraph put: {med_ratio:.2f}x (median of the rounds, each"
        f" measured side by side: {', '.join(f'{x:.2f}' for x in ratios)})"
    )
    print(f"  ratio nightshift / raw COPY:      {med['nightshift'] / med['copy']:.2f}x")
    # Means over every batch of every round, all three alike.
    per_batch = 1000 / (rounds * len(batches))
    lookup = sum(clock.spent.get(w, 0.0) for w in ("SELECT", lookups.EXISTING.name)) * per_batch
    write = sum(clock.spent.get(w, 0.0) for w in ("WITH", WRITE_ALL_PREPARED.name)) * per_batch
    total = sum(count / rate for rate in rates["nightshift"]) * per_batch
    lookups_sent = sum(clock.sent.get(w, 0) for w in ("SELECT", lookups.EXISTING.name))
    print(
        f"  nightshift per batch of {batch}: {total:.2f} ms in all; its statements,"
        f" round trips included: the lookup {lookup:.2f} ms (beside the gate, in a thread,"
        " only across a network),"
        f" the write {write:.2f} ms; the rest is Python"
    )
    print(
        f"  lookups sent: {lookups_sent} for {rounds * len(batches)} applies (the others"
        " knew their slots: memory/known_slots.py; a writer's first apply in a scope reads it)"
    )


# -- (b) load latency --------------------------------------------------------------------


def bulk_load(url: str, count: int, scopes: int) -> None:
    engine = open_engine(url)
    schema.upgrade(engine)
    indexes = list(memories.indexes)
    with engine.begin() as conn:
        fulltext.drop(conn)
        for index in indexes:
            index.drop(conn)
    started = time.perf_counter()
    copy_memories(url, rows(count, scopes))
    copied = time.perf_counter() - started
    with engine.begin() as conn:
        for index in indexes:
            index.create(conn)
        fulltext.create_stored_vector(conn)
        fulltext.index_active_only(conn)
        fulltext.vector_given(conn)
    print(
        f"  loaded {count} memories: COPY {copied:.0f}s, indexes {time.perf_counter() - started - copied:.0f}s"
    )
    engine.dispose()


def after_restore(url: str, table: str) -> None:
    """What an operator runs after a bulk restore: VACUUM (ANALYZE). Without it the
    first reads of every page set hint bits (writes, in the middle of a read) and
    the planner has no statistics. Both stores get the same treatment."""
    with psycopg.connect(_libpq(url), autocommit=True) as conn:
        conn.execute(f"VACUUM (ANALYZE) {table}")


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def bench_loads(
    admin: str, count: int, scopes: int, queries: int, repeats: int, keep: bool
) -> None:
    print(f"\n(b) load latency: {count} memories across {scopes} scopes, {queries} queries each")
    with fresh_database(admin, keep=keep) as url:
        bulk_load(url, count, scopes)
        with PostgresStore.from_conn_string(_libpq(url)) as lg:
            lg.setup()
            copy_langgraph(url, rows(count, scopes))
            after_restore(url, "ns_memories")
            after_restore(url, "store")
            print("  after loading: VACUUM (ANALYZE) of ns_memories and of LangGraph's store")
            engine = open_engine(url)
            store = Store(engine)
            rng = random.Random(3)
            picks = {
                label: [
                    (scope_of(rng.randrange(scopes)), rng.choice(words)) for _ in range(queries)
                ]
                for words, label in ((COMMON, "common"), (RARE, "rare"))
            }
            for label in picks:  # warm both stores' caches and connections
                for scope, word in picks[label][:20]:
                    store.load(scope, goal=word)
                    lg.search((scope.tenant, scope.user, scope.agent), query=word, limit=20)
            cells: dict[tuple[str, str], list[tuple[float, float]]] = {}
            for _ in range(repeats):
                for label, chosen in picks.items():
                    ns_times: list[float] = []
                    lg_times: list[float] = []
                    for scope, word in chosen:  # alternate, so both see the same noise
                        ns_times += timed(lambda s=scope, w=word: store.load(s, goal=w), 1)
                        namespace = (scope.tenant, scope.user, scope.agent)
                        lg_times += timed(
                            lambda n=namespace, w=word: lg.search(n, query=w, limit=20), 1
                        )
                    for name, times in (("nightshift", ns_times), ("langgraph", lg_times)):
                        cells.setdefault((name, label), []).append(
                            (pct(times, 0.5), pct(times, 0.99))
                        )
            engine.dispose()
            print(
                f"  {repeats} repeats of {queries} loads per word class; p50/p99 are the median"
                " over repeats, [per repeat p99 in brackets]"
            )
            for label in picks:
                ns, lgt = cells[("nightshift", label)], cells[("langgraph", label)]
                ns50, ns99 = (statistics.median(c[i] for c in ns) for i in (0, 1))
                lg50, lg99 = (statistics.median(c[i] for c in lgt) for i in (0, 1))
                print(
                    f"  {label:<6} nightshift load  p50 {ns50:6.2f} ms  p99 {ns99:6.2f} ms"
                    f" | LangGraph search p50 {lg50:6.2f} ms  p99 {lg99:6.2f} ms"
                    f" | p99 ratio LangGraph/nightshift {lg99 / ns99:.2f}x"
                )
                print(
                    f"         per repeat p99: nightshift [{', '.join(f'{c[1]:.2f}' for c in ns)}]"
                    f"  LangGraph [{', '.join(f'{c[1]:.2f}' for c in lgt)}]"
                )
        generic_plans(url, scopes, queries)


GENERIC_SEARCH = """
SELECT id FROM ns_memories
WHERE tenant = $1 AND user_id = $2 AND agent_id = $3 AND status = 'active'
  AND search_vector @@ to_tsquery('english', $4)
ORDER BY ts_rank(search_vector, to_tsquery('english', $4)) DESC LIMIT 20
"""
GENERIC_LOAD = """
SELECT id FROM ns_memories
WHERE tenant = $1 AND user_id = $2 AND agent_id = $3 AND status = 'active'
ORDER BY ts_rank(search_vector, to_tsquery('english', $4)) DESC LIMIT 60
"""


def generic_plans(url: str, scopes: int, queries: int) -> None:
    """Prepared full-text queries under generic vs custom plans, common vs rare words."""
    print("  prepared statements, generic vs custom plan (p50 / p99 ms):")
    rng = random.Random(5)
    with psycopg.connect(_libpq(url), cursor_factory=psycopg.ClientCursor) as conn:
        for name, sql in (
            ("search (@@ filter)", GENERIC_SEARCH),
            ("load pool (rank in scope)", GENERIC_LOAD),
        ):
            conn.execute("DEALLOCATE ALL")
            conn.execute(f"PREPARE q(text, text, text, text) AS {sql}")
            for mode in ("force_custom_plan", "force_generic_plan"):
                conn.execute(f"SET plan_cache_mode = {mode}")
                cells = []
                for words in (COMMON, RARE):
                    times = []
                    for _ in range(max(queries // 2, 20)):
                        s = scope_of(rng.randrange(scopes))
                        args = (s.tenant, s.user, s.agent, rng.choice(words))
                        times += timed(
                            lambda a=args: conn.execute("EXECUTE q(%s, %s, %s, %s)", a).fetchall(),
                            1,
                        )
                    cells.append(
                        f"{'common' if words is COMMON else 'rare'} {pct(times, 0.5):6.2f} / {pct(times, 0.99):6.2f}"
                    )
                print(f"    {name:<26} {mode:<19} " + "   ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--memories", type=int, default=1_000_000)
    parser.add_argument("--scopes", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=3, help="Repeats of the load timing.")
    parser.add_argument("--writes", type=int, default=5_000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--skip-writes", action="store_true")
    parser.add_argument("--skip-loads", action="store_true")
    parser.add_argument("--keep", action="store_true", help="Keep the load database.")
    args = parser.parse_args()
    # As a worker does at start (`workers.tasks`): the imports out of the collector's
    # reach, for both sides alike.
    gc.collect()
    gc.freeze()
    if not args.skip_writes:
        bench_writes(args.postgres_url, args.writes, args.batch, args.rounds)
    if not args.skip_loads:
        bench_loads(
            args.postgres_url, args.memories, args.scopes, args.queries, args.repeats, args.keep
        )


if __name__ == "__main__":
    main()
