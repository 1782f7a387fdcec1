"""Work started now and collected later: a database read that runs while Python judges.

The memory writer asks PostgreSQL for the rows its batch touches, then runs the
write gate over the batch. Neither needs the other, so the read goes to a thread
and the gate runs meanwhile: the query's round trip and the server's work overlap
the gate's Python, since psycopg2 lets go of the GIL while it waits on the server.

Measured with the server on the same 2-core machine, the same batches applied
alternately with and without the thread differ by 1–2%, either way: the server's
share of the read is small there, about what the thread costs. What the thread
hides is the wait for the server, so its worth grows with the round trip to a
server across a network (not measured here: the machine cannot delay loopback).

A thread per call, not a pool: a pool's threads do not survive the fork of a
Celery worker, and starting and joining one costs about 0.1 ms.
`Thread.start` returns once the thread runs, and the thread keeps the GIL until
it blocks on the server, so the query is sent before the caller goes on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


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
