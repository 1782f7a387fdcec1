"""A run that kills its worker every time is given up, not re-sent forever; one
killed at its hard time limit ends `timed_out` at once."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial
from pathlib import Path

import pytest

from tests.acceptance.harness import System
from tests.acceptance.test_faults import AGENTS, fault_system, send, succeeded
from workers import runs
from workers.app import RUN_TASK, RUNS_QUEUE, create_app
from workers.enqueue import task_id
from workers.runs import Run, RunRequest, RunStatus
from workers.sandbox import leftovers
from workers.settings import Settings

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


def timed_out(system: System, key: str) -> Run | None:
    found = run_of(system, key)
    return found if found is not None and found.status is RunStatus.TIMED_OUT else None


def test_a_run_killed_at_its_hard_time_limit_ends_timed_out_without_a_retry(
    tmp_path: Path,
) -> None:
    env = {
        "NIGHTSHIFT_AGENTS": f"{AGENTS};stubborn=tests.acceptance.agents:stubborn",
        "NIGHTSHIFT_SANDBOX_SWEEP_AGE": "600",  # the sweep removes nothing in this test
    }
    with fault_system(tmp_path) as system:
        system.env.update(env)
        system.start("writer")
        worker = system.start("worker")  # no beat: no reaper to re-send or give up
        settings = Settings.from_env(system.env)
        with system.engine.begin() as conn:
            request = RunRequest(key="stubborn", agent="stubborn", tenant="acme", time_limit=1)
            assert runs.create(conn, [request], datetime.now(UTC)) == ["stubborn"]
        app = create_app(settings)
        try:
            # The hard limit is 3 s here, not the 31 s `enqueue` would give a 1 s run.
            app.send_task(
                RUN_TASK,
                args=["stubborn"],
                task_id=task_id("stubborn"),
                queue=RUNS_QUEUE,
                soft_time_limit=1,
                time_limit=3,
            )
        finally:
            app.close()
        # Before: the run stayed `running` until its lease lapsed, was re-sent as a lost
        # worker's, killed again, and given up as `failed`; its sandbox stayed meanwhile.
        done = system.wait_for("the run to time out", partial(timed_out, system, "stubborn"))
        assert (done.attempts, done.lost) == (1, 0)
        assert done.error == (
            "time limit of 1s exceeded; the agent did not stop, so its worker process was"
            " killed at the hard limit of 3s"
        )
        assert leftovers(settings.sandbox_root) == []
        # The worker replaced the killed process and goes on.
        send(system, ["after"], agent="steady")
        system.wait_for("the next run", partial(succeeded, system, "after"))
        assert worker.poll() is None and run_of(system, "stubborn") == done
