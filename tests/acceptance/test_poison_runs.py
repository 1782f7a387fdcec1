"""A run that kills its worker every time is given up, not re-sent forever."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from tests.acceptance.harness import System
from tests.acceptance.test_faults import AGENTS, fault_system, send, succeeded
from workers.runs import Run, RunStatus

pytestmark = pytest.mark.acceptance


def run_of(system: System, key: str) -> Run | None:
    return next((r for r in system.runs() if r.key == key), None)


def failed(system: System, key: str) -> Run | None:
    found = run_of(system, key)
    return found if found is not None and found.status is RunStatus.FAILED else None


def test_a_run_that_kills_its_worker_is_failed_after_its_attempts(tmp_path: Path) -> None:
    env = {
        "NIGHTSHIFT_AGENTS": f"{AGENTS};crasher=tests.acceptance.agents:crasher",
        "NIGHTSHIFT_RUN_MAX_ATTEMPTS": "2",
    }
    with fault_system(tmp_path) as system:
        system.env.update(env)
        system.start("beat")  # drives the reaper
        system.start("writer")
        worker = system.start("worker")
        send(system, ["poison"], agent="crasher")
        # Before: each lapsed lease re-sent the run, and it took a worker process down
        # again, every lease period, for ever.
        gone = system.wait_for("the crashing run to be given up", partial(failed, system, "poison"))
        assert gone.attempts == gone.lost == 2
        assert gone.error.startswith("given up after its worker stopped 2 times")
        assert "trigger it again" in gone.error
        # The queue is not poisoned: the same worker runs the next run, and the given-up
        # run stays failed (no stray delivery takes it up again).
        send(system, ["after"], agent="steady")
        system.wait_for("the next run", partial(succeeded, system, "after"))
        assert worker.poll() is None
        assert (poison := run_of(system, "poison")) is not None and poison.attempts == 2
        listed = system.cli("runs", "--agent", "crasher")
        assert listed.returncode == 0 and "failed" in listed.stdout and "given up" in listed.stdout
