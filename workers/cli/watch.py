"""What `nightshift up` prints: one paragraph per finished run, continuity made visible."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

from workers import runs
from workers.cli.base import echo
from workers.cli.supervisor import Supervisor
from workers.runs import Run
from workers.runtime import Runtime

POLL_SECONDS = 1.0
RECEIPT_WAIT_SECONDS = 10.0


def watch_runs(rt: Runtime, supervisor: Supervisor, *, stop_after: int | None) -> int:
    """Print runs as they finish until Ctrl-C, `stop_after` runs, or a child dies."""
    since = datetime.now(UTC)
    printed: set[str] = set()
    count = 0
    while stop_after is None or count < stop_after:
        dead = supervisor.dead()
        if dead:
            for name, code in dead:
                echo(
                    f"{name} exited with code {code}; see {supervisor.log_dir / name}.log", err=True
                )
            return 1
        with rt.engine.connect() as conn:
            finished = [r for r in runs.recent(conn, limit=50, since=since) if r.key not in printed]
        for run in sorted(finished, key=lambda r: r.finished_at or since):
            count += 1
            printed.add(run.key)
            echo(describe(rt, run, f"run {count}"))
        time.sleep(POLL_SECONDS)
    return 0


def describe(rt: Runtime, run: Run, heading: str = "run") -> str:
    """A finished run as a paragraph: what it was given, what the agent said, what the
    writer kept of its candidates, and whether its sandbox is gone."""
    took = f"{run.duration.total_seconds():.2f}s" if run.duration else "?"
    lines = [
        f"{heading} · {run.key} · {run.status.value} in {took}",
        f"  loaded {_count(len(run.loaded_ids), 'memory', 'memories')}"
        f"{' (from earlier runs)' if run.loaded_ids else ''}",
    ]
    if run.summary:
        lines.append(f"  agent: {run.summary}")
    if run.error:
        lines.append(f"  error: {run.error}")
    lines.append(f"  wrote: {_writes(rt, run)}")
    gone = run.sandbox and not Path(run.sandbox).exists()
    lines.append(f"  sandbox {run.sandbox or '(none)'} {'is gone' if gone else 'STILL EXISTS'}")
    return "\n".join(lines)


def _writes(rt: Runtime, run: Run) -> str:
    if not run.write_handle:
        return "nothing"
    deadline = time.monotonic() + RECEIPT_WAIT_SECONDS
    while time.monotonic() < deadline:
        receipt = rt.store.receipt(run.write_handle)
        if receipt is not None:
            counts = receipt.counts()
            listed = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
            # Anything not stored has a reason per candidate in the receipt.
            why = (
                ""
                if counts.keys() <= {"stored"}
                else f" (why: nightshift memory receipt '{run.write_handle}')"
            )
            return f"{_count(run.candidates, 'candidate')} → {listed}{why}"
        time.sleep(0.2)
    return f"{_count(run.candidates, 'candidate')}, receipt {run.write_handle} still pending"


def _count(n: int, one: str, many: str = "") -> str:
    """ "1 memory", "3 memories"."""
    return f"{n} {one if n == 1 else many or one + 's'}"
