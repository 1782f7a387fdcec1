from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.acceptance.harness import System, base_env
from tests.services import amqp_vhost, postgres_database, redis_database
from workers.app import MAINTENANCE_QUEUE, RUNS_QUEUE
from workers.sharding import write_queues


@pytest.fixture(params=["embedded", "redis-postgres"])
def system(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[System]:
    """A system of real processes: embedded defaults, or Redis + PostgreSQL."""
    if request.param == "embedded":
        sys_ = System(tmp_path, base_env(tmp_path, f"sqlite:///{tmp_path / 'ns.db'}", None))
        yield from _run(sys_)
        return
    with postgres_database() as db_url, redis_database() as redis_url:
        yield from _run(System(tmp_path, base_env(tmp_path, db_url, redis_url)))


@pytest.fixture
def rabbit_system(tmp_path: Path) -> Iterator[System]:
    """A system of real processes on RabbitMQ + PostgreSQL, in a vhost of its own
    where the machine allows one (`tests.services.amqp_vhost`)."""
    queues = [RUNS_QUEUE, MAINTENANCE_QUEUE, *write_queues(1), *write_queues(2)]
    with postgres_database() as db_url, amqp_vhost(queues) as amqp_url:
        yield from _run(System(tmp_path, base_env(tmp_path, db_url, amqp_url)))


def _run(system: System) -> Iterator[System]:
    result = system.cli("db", "upgrade")
    assert result.returncode == 0, result.stderr
    try:
        yield system
    finally:
        system.discard()
        system.engine.dispose()
