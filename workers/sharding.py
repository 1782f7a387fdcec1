"""Which memory-writer shard applies a write: one consumer per shard, one shard per tenant.

With `NIGHTSHIFT_WRITER_SHARDS=1` (the default) there is one queue, `memory.write`.
With N > 1 there are `memory.write.0` … `memory.write.{N-1}`, each consumed by one
writer (`nightshift writer --shard i`, concurrency 1).

The shard is chosen by tenant, not by the full scope: one run's candidates can
target all four layers of its tenant (private, shared, agent, tenant), and the
agent and tenant layers are written by runs of many users. Routing by tenant keeps
each run's batch in one transaction on one shard and gives every scope exactly
one writer, so a scope's writes are applied in submission order.
"""

from __future__ import annotations

import hashlib

WRITE_QUEUE = "memory.write"


def write_queues(shards: int) -> list[str]:
    if shards < 1:
        raise ValueError(f"writer shards must be at least 1, not {shards}")
    return [WRITE_QUEUE] if shards == 1 else [f"{WRITE_QUEUE}.{i}" for i in range(shards)]


def is_write_queue(name: str) -> bool:
    """`memory.write` or one of its shards `memory.write.<i>`."""
    shard = name.removeprefix(f"{WRITE_QUEUE}.")
    return name == WRITE_QUEUE or (shard != name and shard.isdigit())


def shard_of(tenant: str, shards: int) -> int:
    """A stable shard for `tenant`: the same in every process and across restarts."""
    digest = hashlib.sha256(tenant.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


def write_queue(tenant: str, shards: int) -> str:
    return write_queues(shards)[shard_of(tenant, shards)]
