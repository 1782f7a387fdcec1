"""Starting and stopping the child processes of `nightshift up`."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from workers import flower
from workers.settings import Settings
from workers.sharding import WRITE_QUEUE

STOP_GRACE_SECONDS = 15.0


def flower_command(settings: Settings, address: str = "127.0.0.1") -> list[str]:
    """Flower through workers.flower, which also puts /metrics behind its auth."""
    return [sys.executable, "-m", "workers.flower", *flower.command_line(settings, address)]


def celery_command(role: str, concurrency: int = 2, *, shard: int | None = None) -> list[str]:
    """The celery command line for a role; the same the README and compose file use.

    A writer is always one process (concurrency 1): one writer per queue is what
    makes a scope's writes apply in order. `shard` picks `memory.write.<shard>`.
    """
    base = [sys.executable, "-m", "celery", "-A", "workers.app"]
    logging = ["--loglevel", "INFO"]
    if role == "worker":
        return [
            *base,
            "worker",
            "-Q",
            "runs,maintenance",
            "-n",
            "runs@%h",
            "-E",
            "--concurrency",
            str(concurrency),
            *logging,
        ]
    if role == "writer":
        queue = WRITE_QUEUE if shard is None else f"{WRITE_QUEUE}.{shard}"
        name = "writer@%h" if shard is None else f"writer-{shard}@%h"
        return [*base, "worker", "-Q", queue, "-n", name, "-E", "--concurrency", "1", *logging]
    if role == "beat":
        return [*base, "beat", *logging]
    raise ValueError(f"unknown role {role!r}")


@dataclass
class Supervisor:
    settings: Settings
    log_dir: Path
    children: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start(self, name: str, argv: list[str]) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.settings.to_env()}
        # A session of its own: Ctrl-C reaches `up` only, which then stops children in order.
        with open(self.log_dir / f"{name}.log", "ab") as log:  # the child keeps its own copy
            self.children[name] = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )

    def dead(self) -> list[tuple[str, int]]:
        return [(n, p.returncode) for n, p in self.children.items() if p.poll() is not None]

    def stop_all(self) -> None:
        """SIGTERM to each child itself, then SIGKILL to the group of any still up after
        `STOP_GRACE_SECONDS`. A Celery worker told to stop finishes the run it holds
        (warm shutdown) and then stops its pool; a SIGTERM to its whole group also
        reached the pool processes, which died mid-run and recorded the run as failed."""
        for proc in self.children.values():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE_SECONDS
        for proc in self.children.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
