"""Per-process resources built from settings: the engine, the memory store, the leases.

Built lazily once per process (after a prefork child starts, so no connection is
shared across a fork), and reachable from a task as `runtime_of(task.app)`.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from functools import cached_property

from celery import Celery
from sqlalchemy import Engine

from memory.engine import open_engine
from memory.store import Store
from workers.leases import LeaseRenewer
from workers.settings import Settings


@dataclass
class Runtime:
    settings: Settings

    @cached_property
    def engine(self) -> Engine:
        return open_engine(self.settings.database_url)

    @cached_property
    def store(self) -> Store:
        """The store runs load from and the CLI reads with, with NIGHTSHIFT_MEMORY_TTL."""
        return Store(self.engine, ttl=self.settings.ttl())

    @cached_property
    def leases(self) -> LeaseRenewer:
        return LeaseRenewer(self.engine)

    @property
    def worker_id(self) -> str:
        return worker_id(os.getpid())


def worker_id(pid: int) -> str:
    """The lease owner a run claimed in process `pid` of this host is recorded as."""
    return f"{socket.gethostname()}:{pid}"


def runtime_of(app: Celery) -> Runtime:
    """This process's runtime for `app` (a fork gets a fresh one).

    Kept on the app itself: keying a cache by `id(app)` would hand a new app the
    runtime (and database) of a collected one that happened to share its id.
    """
    pid, runtime = getattr(app, "_nightshift_runtime", (None, None))
    if pid != os.getpid() or runtime is None:
        runtime = Runtime(app.nightshift_settings)
        app._nightshift_runtime = (os.getpid(), runtime)
    return runtime
