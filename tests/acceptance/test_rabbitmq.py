"""nightshift on RabbitMQ + PostgreSQL, as an operator runs it: the CLI and real workers.

The broker is NIGHTSHIFT_TEST_AMQP_URL (a vhost of its own per test where
`rabbitmqctl` can make one); task results go to PostgreSQL, as the README advises.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from kombu import Connection
from prometheus_client import CollectorRegistry, generate_latest
from sqlalchemy import text

from tests.acceptance.harness import System, has_receipt, stop_pool
from workers.app import create_app
from workers.enqueue import task_id
from workers.health import queue_states
from workers.metrics import NightshiftCollector
from workers.runtime import Runtime
from workers.settings import Settings

pytestmark = pytest.mark.acceptance

ANA = ["--tenant", "acme", "--user", "ana", "--agent", "triage"]


def test_a_triggered_run_is_remembered_and_its_result_kept(rabbit_system: System) -> None:
    (Path(rabbit_system.env["NIGHTSHIFT_TEST_CONTROL"]) / "open").touch()  # `gated` won't wait
    rabbit_system.start("worker")
    rabbit_system.start("writer")
    said = rabbit_system.cli(
        "trigger", "gated", "--tenant", "acme", "--user", "ana", "--wait", "--json"
    )
    assert said.returncode == 0, said.stdout + said.stderr
    triggered = json.loads(said.stdout)
    assert triggered["run"]["status"] == "succeeded", triggered
    key = triggered["run_key"]

    rabbit_system.wait_for(
        "the writer's receipt", lambda: has_receipt(rabbit_system, f"write:{key}")
    )
    shown = rabbit_system.cli(
        "memory", "show", "--tenant", "acme", "--user", "ana", "--agent", "gated", "--all", "--json"
    )
    assert sorted(m["content"] for m in json.loads(shown.stdout)) == [
        "checked the payments queue",
        "payments queue depth 12",
    ]

    def result() -> str | None:
        with rabbit_system.engine.connect() as conn:
            found = conn.execute(
                text("SELECT status FROM celery_taskmeta WHERE task_id = :id"),
                {"id": task_id(key)},
            )
            return found.scalar()

    assert rabbit_system.wait_for("the run's task result", result) == "SUCCESS"


def test_status_and_metrics_count_each_writer_queue_s_consumers(rabbit_system: System) -> None:
    """Two writer shards and one writer: the workers' answers look healthy ("1
    answering"); RabbitMQ's own count shows shard 1 has nobody to apply its writes."""
    rabbit_system.env["NIGHTSHIFT_WRITER_SHARDS"] = "2"
    rabbit_system.serve("writer-0", "writer", "--shard", "0")

    def status() -> dict[str, dict[str, object]] | None:
        said = rabbit_system.cli("status", "--json")
        named = {c["name"]: c for c in json.loads(said.stdout)["checks"]}
        return named if named["memory writer"]["value"] else None

    checks = rabbit_system.wait_for("the writer to answer", status)
    assert checks["broker"]["ok"] and str(checks["broker"]["detail"]).startswith("amqp: ")
    assert checks["memory writer"]["ok"]
    assert checks["writer queues"] == {
        "name": "writer queues",
        "ok": False,
        "detail": "memory.write.1 no consumer",
        "value": {"memory.write.0": 1, "memory.write.1": 0},
    }
    assert rabbit_system.cli("status").returncode == 1

    settings = Settings.from_env(rabbit_system.env)
    registry = CollectorRegistry()
    registry.register(NightshiftCollector(Runtime(settings), create_app(settings)))
    scraped = generate_latest(registry).decode()
    assert 'nightshift_queue_consumers{queue="memory.write.0"} 1.0' in scraped
    assert 'nightshift_queue_consumers{queue="memory.write.1"} 0.0' in scraped
    assert 'nightshift_queue_depth{queue="memory.write.1"} 0.0' in scraped


def test_a_killed_writer_s_batch_comes_back_at_once_and_is_applied_once(
    rabbit_system: System,
) -> None:
    """The writer holds the batch unacknowledged (its pool process stopped before
    applying it) and is SIGKILLed: RabbitMQ requeues the batch as the connection drops,
    not after a visibility timeout, and the next writer applies it."""
    app = create_app(Settings.from_env(rabbit_system.env))
    rabbit_system.start("writer")
    stop_pool(rabbit_system, "writer")  # holds what it is given, applies nothing
    content = ["--source", "stated", "--content", "renewal is on 2027-03-01"]
    said = rabbit_system.cli("memory", "write", *ANA, *content, "--json")
    handle = json.loads(said.stdout)["handle"]

    def waiting(depth: int) -> Callable[[], bool]:
        return lambda: queue_states(app)["memory.write"].depth == depth

    rabbit_system.wait_for("the writer to take the batch", waiting(0))
    rabbit_system.kill("writer")  # SIGKILL to its process group, the stopped child too
    assert not has_receipt(rabbit_system, handle)  # never applied
    rabbit_system.wait_for("the batch back in its queue", waiting(1), timeout=10)  # Redis: 300 s
    rabbit_system.start("writer")
    rabbit_system.wait_for("the batch to be applied", lambda: has_receipt(rabbit_system, handle))
    shown = rabbit_system.cli("memory", "show", *ANA, "--all", "--json")
    assert [m["content"] for m in json.loads(shown.stdout)] == ["renewal is on 2027-03-01"]


@pytest.mark.parametrize("wrong", ["password", "vhost"])
def test_a_broker_that_refuses_is_named_and_the_run_stays_queued(
    rabbit_system: System, wrong: str
) -> None:
    broker = Connection(rabbit_system.env["NIGHTSHIFT_BROKER_URL"])
    broker = broker.clone(**{"password" if wrong == "password" else "virtual_host": "nope"})
    refusing = {"NIGHTSHIFT_BROKER_URL": broker.as_uri(include_password=True)}
    said = rabbit_system.cli("trigger", "gated", "--tenant", "acme", "--user", "ana", env=refusing)
    assert said.returncode == 4, said.stdout + said.stderr  # a service could not be used
    assert "Traceback" not in said.stderr
    refused = "ACCESS_REFUSED" if wrong == "password" else "vhost nope not found"
    assert said.stderr.startswith("Error: the broker refused: ") and refused in said.stderr
    assert "check NIGHTSHIFT_BROKER_URL" in said.stderr
    assert [run.status.value for run in rabbit_system.runs()] == ["queued"]  # the reaper's
    # A writer does not start against it (Celery, reconnecting on channel errors, would
    # retry the refusal forever); one that cannot reach the broker yet is left to retry.
    writer = rabbit_system.cli("writer", env=refusing, timeout=60)
    assert writer.returncode == 4 and refused in writer.stderr, writer.stdout + writer.stderr
