"""Work started now and collected later: a database read that runs while Python judges.

The memory writer asks PostgreSQL for the rows its batch touches, then runs the
write gate over the batch. Neither needs the other, so the read can go to a
thread while the gate runs: the query's round trip and the server's work overlap
the gate's Python, since psycopg2 lets go of the GIL while it waits on the server.

That pays only when there is a wait to hide. The thread costs the caller about
0.2 ms (starting it, and the GIL handed back and forth), and on a server on the
same machine the wait is shorter than that. Measured 2026-12-04 on the 2-core
machine, 200 batches of 50 applied alternately (`bench/writer_parts.py`): with
the server on loopback the apply took 0.95x as long without the thread; through
a relay adding about 2 ms of round trip (a Python TCP proxy, since the machine
cannot delay loopback), 1.05x as long without it (9.35 against 8.89 ms). So a
read gets a thread only on a connection whose round trip, measured as it
connected (`memory.engine.round_trip`), is above `THREAD_ABOVE_SECONDS`.

A thread per call, not a pool: a pool's threads do not survive the fork of a
Celery worker, and starting and joining one costs about 0.07 ms.
`Thread.start` returns once the thread runs, and the thread keeps the GIL until
it blocks on the server, so the query is sent before the caller goes on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

THREAD_ABOVE_SECONDS = 0.0002
"""A round trip above which a read is worth a thread: about what the thread costs.
Loopback measures 0.01-0.08 ms here; a network hop in one data centre, more."""


def worth_a_thread(round_trip: float | None) -> bool:
    """Whether a connection with this round trip (seconds; None: not measured, as on
    SQLite, which answers in process) should read from a thread."""
    return round_trip is not None and round_trip > THREAD_ABOVE_SECONDS


class Meanwhile(Generic[T]):
    """`work()` running in a thread from construction on; calling the object waits for
    it and returns its result or raises its exception. Call it exactly once, before
    anything else uses what `work` uses (a connection is not shared, only handed over)."""

    def __init__(self, work: Callable[[], T]) -> None:
        self._work = work
        self._result: T | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="nightshift-meanwhile", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._result = self._work()
        except BaseException as error:  # handed to the caller, raised there
            self._error = error

    def __call__(self) -> T:
        self._thread.join()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._result  # type: ignore[return-value]
