from __future__ import annotations

from collections import Counter

import pytest

from workers.cli.supervisor import celery_command
from workers.sharding import is_write_queue, shard_of, write_queue, write_queues


def test_one_shard_is_the_plain_queue_and_many_are_numbered() -> None:
    assert write_queues(1) == ["memory.write"]
    assert write_queues(4) == [f"memory.write.{i}" for i in range(4)]
    with pytest.raises(ValueError, match="at least 1"):
        write_queues(0)
    assert all(map(is_write_queue, write_queues(1) + write_queues(4)))
    assert not any(
        map(is_write_queue, ["runs", "maintenance", "memory.writes", "memory.write.", "3"])
    )


def test_a_tenant_always_maps_to_the_same_shard_and_tenants_spread() -> None:
    tenants = [f"tenant-{i}" for i in range(2000)]
    assert [shard_of(t, 4) for t in tenants] == [shard_of(t, 4) for t in tenants]
    spread = Counter(write_queue(t, 4) for t in tenants)
    assert set(spread) == set(write_queues(4))
    assert min(spread.values()) > 400  # roughly even: 500 each


def test_writer_command_consumes_exactly_its_shard_with_one_process() -> None:
    argv = celery_command("writer", shard=2)
    assert argv[argv.index("-Q") + 1] == "memory.write.2"
    assert argv[argv.index("--concurrency") + 1] == "1"
    assert argv[argv.index("-n") + 1] == "writer-2@%h"
