"""A write batch that kills its writer every time is given up, not redelivered for ever.

Before: the write task is acknowledged late and requeued when its pool process is
lost, so the batch came back, killed the writer's process again, and so on without
end, while every write queued behind it on its queue waited.
"""

from __future__ import annotations

import json
from functools import partial

import pytest
from sqlalchemy import select

from tests.acceptance.harness import System, has_receipt
from tests.acceptance.writer_crash import MARK
from workers.tables import write_attempts

pytestmark = pytest.mark.acceptance

ANA = ["--tenant", "acme", "--user", "ana", "--agent", "triage"]


def write(system: System, content: str) -> str:
    said = system.cli("memory", "write", *ANA, "--source", "stated", "--content", content, "--json")
    assert said.returncode == 0, said.stdout + said.stderr
    handle: str = json.loads(said.stdout)["handle"]
    return handle


ATTEMPTS = 2
"""Below the default 3: each crash costs Celery's `worker_lost_wait` (2 s) on the
embedded broker before the batch comes back."""


def given_up(system: System) -> None:
    system.env["NIGHTSHIFT_WRITE_MAX_ATTEMPTS"] = str(ATTEMPTS)
    system.serve("writer", "writer", "-I", "tests.acceptance.writer_crash")
    poison = write(system, f"the renewal is on 2027-03-01; {MARK}")
    after = write(system, "the renewal is on 2027-04-01")
    system.wait_for("the poison batch's receipt", partial(has_receipt, system, poison), 120)
    shown = system.cli("memory", "receipt", poison, "--json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    [decision] = json.loads(shown.stdout)["decisions"]
    assert (decision["outcome"], decision["rule"]) == ("refused", "writer-crashed")
    assert f"on each of {ATTEMPTS} attempts" in decision["reason"]
    # The queue is not poisoned: the write behind it is applied by the same writer.
    system.wait_for("the next batch", partial(has_receipt, system, after), 60)
    assert system.procs["writer"].poll() is None
    listed = system.cli("memory", "show", *ANA, "--all", "--json")
    assert [m["content"] for m in json.loads(listed.stdout)] == ["the renewal is on 2027-04-01"]
    with system.engine.connect() as conn:  # counted while it came back, kept once given up
        kept = conn.execute(select(write_attempts.c.handle, write_attempts.c.attempts)).all()
        assert [tuple(row) for row in kept] == [(poison, ATTEMPTS)]
    # Status names it (and is unhealthy for a day); the metric counts it.
    status = json.loads(system.cli("status", "--json").stdout)
    [check] = [c for c in status["checks"] if c["name"] == "given-up writes"]
    assert not check["ok"] and check["value"] == [poison], check
    assert f"the newest {poison} after {ATTEMPTS} attempts" in check["detail"]
    log = (system.root / "writer.log").read_text()
    assert log.count("Task handler raised error: WorkerLostError") == ATTEMPTS
    assert f"given up after {ATTEMPTS} attempts" in log


def test_a_batch_that_kills_its_writer_is_refused_after_its_attempts(system: System) -> None:
    given_up(system)


def test_on_rabbitmq_too(rabbit_system: System) -> None:
    given_up(rabbit_system)
