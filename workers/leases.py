"""Keeping the leases of the runs a process is working on: one thread per process.

A run's lease must be renewed every third of its length while its agent works,
or the reaper hands the run to another worker. Most runs end long before that,
so instead of a thread per run (whose start alone costs more than a short run's
bookkeeping), each process has one renewer: a run registers its lease while it
works, and the renewer's thread, started on first use (after a prefork child is
forked), renews every registered lease that is a third of the way through.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Engine

from workers import runs

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
TICK_SECONDS = 1.0  # how often the renewer looks; a lease is at least a few seconds long


@dataclass
class _Held:
    owner: str
    lease: timedelta
    clock: Clock
    renew_at: float  # monotonic


class LeaseRenewer:
    """Renews the leases registered with `hold` from one background thread."""

    def __init__(self, engine: Engine, *, tick: float = TICK_SECONDS) -> None:
        self._engine = engine
        self._tick = tick
        self._held: dict[str, _Held] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @contextmanager
    def hold(self, key: str, owner: str, lease: timedelta, clock: Clock) -> Iterator[None]:
        """Keep the lease of run `key` renewed until the block ends."""
        every = lease.total_seconds() / 3
        with self._lock:
            self._held[key] = _Held(owner, lease, clock, time.monotonic() + every)
            self._tick = min(self._tick, every / 2)  # a short lease is looked at more often
            self._start()
        try:
            yield
        finally:
            with self._lock:
                self._held.pop(key, None)

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name="lease-renewer", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while True:
            time.sleep(self._tick)
            now = time.monotonic()
            with self._lock:
                due = [(k, h) for k, h in self._held.items() if h.renew_at <= now]
            for key, held in due:
                self._renew(key, held, now)

    def _renew(self, key: str, held: _Held, now: float) -> None:
        try:
            with self._engine.begin() as conn:
                kept = runs.renew(conn, key, held.owner, held.clock(), held.lease)
        except Exception:
            log.warning(
                "lease renewal failed; will retry",
                exc_info=True,
                extra={"action": "run.lease_retry", "run_key": key},
            )
            return
        with self._lock:
            if not kept:
                self._held.pop(key, None)  # the reaper gave the run away; stop renewing it
            elif key in self._held:
                self._held[key].renew_at = now + held.lease.total_seconds() / 3
