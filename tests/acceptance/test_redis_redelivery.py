"""Redis gives a dead consumer's messages back within its visibility timeout.

kombu's Redis transport keeps a taken message in its `unacked` hash until the
consumer acknowledges it, and only a live consumer's sweep puts it back, once it is
older than the visibility timeout. By default a sweep scans Redis about every 100 s
whatever the timeout; nightshift sets it to a fifth of the timeout
(`workers.app.redis_transport_options`).
"""

from __future__ import annotations

import json
import time

import pytest
import redis

from tests.acceptance.harness import System, has_receipt, stop_pool

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.parametrize("system", ["redis-postgres"], indirect=True),
]

ANA = ["--tenant", "acme", "--user", "ana", "--agent", "triage"]
VISIBILITY_TIMEOUT = 3
SLACK = 15  # a writer's start on a busy machine, and a sweep's interval
"""kombu's default sweep took about 90 s here: well past the timeout plus this."""


def test_a_killed_writer_s_batch_is_applied_once_soon_after_the_visibility_timeout(
    system: System,
) -> None:
    """The writer holds the batch unacknowledged (its pool process stopped before
    applying it) and is SIGKILLed with its pool; the next writer applies the batch
    once, within the visibility timeout and a few seconds."""
    system.env["NIGHTSHIFT_BROKER_VISIBILITY_TIMEOUT"] = str(VISIBILITY_TIMEOUT)
    broker = redis.Redis.from_url(system.env["NIGHTSHIFT_BROKER_URL"])
    system.start("writer")
    stop_pool(system, "writer")
    content = ["--source", "stated", "--content", "renewal is on 2027-03-01"]
    said = system.cli("memory", "write", *ANA, *content, "--json")
    assert said.returncode == 0, said.stdout + said.stderr
    handle = json.loads(said.stdout)["handle"]
    system.wait_for("the writer to take the batch", lambda: broker.hlen("unacked") == 1)
    system.kill("writer")  # SIGKILL to its process group: nothing acknowledges, nothing restores
    killed = time.monotonic()
    assert not has_receipt(system, handle)
    system.start("writer", "writer-2")
    system.wait_for(
        "the batch to be applied",
        lambda: has_receipt(system, handle),
        timeout=VISIBILITY_TIMEOUT + SLACK - (time.monotonic() - killed),
    )
    system.wait_for("the batch to be acknowledged", lambda: broker.hlen("unacked") == 0)
    shown = system.cli("memory", "show", *ANA, "--all", "--json")
    assert [m["content"] for m in json.loads(shown.stdout)] == ["renewal is on 2027-03-01"]
    broker.close()
