"""What each part of a memory-writer apply costs on PostgreSQL.

    .venv/bin/python bench/writer_parts.py

For each part, the same bench batches (`bench.memory_data.candidates`) are applied
alternately with the part and without it — ABBA order, one process, one fresh
database — so that both sides meet the same moments of a noisy machine; the
ratio of their medians is the figure to read. "Without" skips the part (its rows
are not written, its thread not started): a way to measure what the part costs,
never a way to run the store.

Needs the `bench` extra and a PostgreSQL server (`--postgres-url`); it creates and
drops its own databases.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.memory_bench import chunks  # noqa: E402
from bench.memory_data import candidates, fresh_database  # noqa: E402
from memory import pending, sql, writing  # noqa: E402
from memory.engine import open_engine  # noqa: E402
from memory.known_slots import KnownSlots  # noqa: E402
from memory.policy import Action, AgentRules, Rule, Verdict  # noqa: E402
from memory.records import Candidate  # noqa: E402
from memory.store import Store  # noqa: E402
from memory.write_audit import WriteAudit  # noqa: E402
from workers import schema  # noqa: E402


@contextmanager
def swapped(owner: Any, name: str, replacement: Any) -> Iterator[None]:
    original = getattr(owner, name)
    setattr(owner, name, replacement)
    try:
        yield
    finally:
        setattr(owner, name, original)


def _no_write_audit(self: WriteAudit, receipt: object) -> list[object]:
    """The apply's audit row (one per tenant, `memory.write_audit`) is not written."""
    return []


_flush = pending._flush_postgres


def _receipt_without_decisions(conn: Any, writes: pending.PendingWrites) -> None:
    """The receipt is written without its per-candidate decisions."""
    writes.receipts = [dataclasses.replace(r, decisions=()) for r in writes.receipts]
    _flush(conn, writes)


def _accept_all(candidate: Candidate, rules: AgentRules) -> Verdict:
    """No gate: every candidate accepted as it came."""
    return Verdict(Action.ACCEPT, candidate.kind, "accepted", Rule.OK)


Part = tuple[Callable[[], Any], Callable[[], Any]]
"""How to apply with the part, and without it."""

PARTS: dict[str, Part] = {
    "the write gate (its rules)": (nullcontext, lambda: swapped(writing, "judge", _accept_all)),
    "the audit row (one per apply)": (
        nullcontext,
        lambda: swapped(WriteAudit, "rows", _no_write_audit),
    ),
    "receipt decisions": (
        nullcontext,
        lambda: swapped(pending, "_flush_postgres", _receipt_without_decisions),
    ),
    # Without it every apply reads its slots first, as a writer that has just started does.
    "the slots the writer knows (no lookup)": (
        nullcontext,
        lambda: swapped(KnownSlots, "recall", lambda self, slots: None),
    ),
    # Whatever the round trip: the thread is used only across a network (`memory.meanwhile`).
    "the lookup's thread beside the gate": (
        lambda: swapped(sql, "worth_a_thread", lambda round_trip: True),
        lambda: swapped(sql, "worth_a_thread", lambda round_trip: False),
    ),
}


def measure(admin: str, part: Part, batches: list[Sequence[Candidate]]) -> tuple[float, float]:
    """Median ms per apply with the part and without it."""
    spent: dict[bool, list[float]] = {True: [], False: []}
    with fresh_database(admin) as url:
        engine = open_engine(url)
        schema.upgrade(engine)
        store = Store(engine)
        for i, batch in enumerate(batches):
            with_part = (i % 4) in (0, 3)  # ABBA: neither side always goes first
            start = time.perf_counter()
            with part[0 if with_part else 1]():
                store.apply(batch, handle=f"parts:{i}", actor="bench")
            if i >= 20:  # after the pool, the prepared statements and the caches warm up
                spent[with_part].append((time.perf_counter() - start) * 1000)
        engine.dispose()
    return statistics.median(spent[True]), statistics.median(spent[False])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--writes", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=50)
    args = parser.parse_args()
    items = candidates(args.writes, scopes=20, batch=args.batch)
    batches = chunks(items, args.batch)
    print(
        f"what each part of an apply costs: {len(batches)} batches of {args.batch},"
        " alternately with and without the part (ABBA), medians per apply"
    )
    for label, part in PARTS.items():
        with_part, without = measure(args.postgres_url, part, batches)
        print(
            f"  {label:<38} with {with_part:6.2f} ms  without {without:6.2f} ms"
            f"  without/with {without / with_part:.2f}x"
        )


if __name__ == "__main__":
    main()
