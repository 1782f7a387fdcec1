"""Four writer shards, many scopes written concurrently: each scope's writes are
applied in submission order, all by the one shard its tenant maps to."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory.records import Candidate, Kind, Provenance, Scope, Source
from memory.store import Store
from tests.acceptance.harness import System, base_env
from tests.services import postgres_database, redis_database
from workers.app import WRITE_TASK, create_app
from workers.settings import Settings
from workers.sharding import shard_of, write_queue

pytestmark = pytest.mark.acceptance

SHARDS = 4
TENANTS = [f"tenant-{i}" for i in range(12)]
VERSIONS = 8


@pytest.fixture
def sharded(tmp_path: Path) -> Iterator[System]:
    with postgres_database() as db_url, redis_database() as redis_url:
        env = base_env(tmp_path, db_url, redis_url)
        env["NIGHTSHIFT_WRITER_SHARDS"] = str(SHARDS)
        system = System(tmp_path, env)
        try:
            yield system
        finally:
            system.discard()
            system.engine.dispose()


def candidate(tenant: str, version: int) -> dict[str, object]:
    return Candidate(
        scope=Scope(tenant, "ana", "triage"),
        kind=Kind.FACT,
        key="counter",
        content=f"{tenant} counter is {version}",
        provenance=Provenance(
            source=Source.OBSERVED, task_id=f"{tenant}-{version}", reference=f"feed#{version}"
        ),
    ).to_json()


def test_each_scope_is_written_in_order_by_exactly_one_shard(sharded: System) -> None:
    for shard in range(SHARDS):
        sharded.serve(f"writer-{shard}", "writer", "--shard", str(shard))
    app = create_app(Settings.from_env(sharded.env))
    for version in range(VERSIONS):  # tenants interleaved, each tenant's writes in order
        for tenant in TENANTS:
            handle = f"write:{tenant}@{version}"
            app.send_task(
                WRITE_TASK,
                args=[handle, f"{tenant}@{version}", [candidate(tenant, version)]],
                queue=write_queue(tenant, SHARDS),
            )
    store = Store(sharded.engine)
    handles = [f"write:{t}@{v}" for t in TENANTS for v in range(VERSIONS)]
    sharded.wait_for(
        "every write to be applied", lambda: all(store.receipt(h) for h in handles), timeout=120
    )

    for tenant in TENANTS:
        chain = store.history(Scope(tenant, "ana", "triage"), "counter")
        assert [m.content for m in chain] == [f"{tenant} counter is {v}" for v in range(VERSIONS)]
        assert [m.status.value for m in chain] == ["superseded"] * (VERSIONS - 1) + ["active"]

    logs = {shard: (sharded.root / f"writer-{shard}.log").read_text() for shard in range(SHARDS)}
    for tenant in TENANTS:
        appliers = {s for s, text in logs.items() if f"write write:{tenant}@" in text}
        assert appliers == {shard_of(tenant, SHARDS)}, tenant
    assert all("write write:" in text for text in logs.values())  # every shard did work


def test_status_names_a_shard_no_writer_reads_though_redis_counts_no_consumers(
    sharded: System,
) -> None:
    """Three of the four shards' writers run: every writer that answers is healthy,
    and Redis has no consumer count to ask; the writers' answers name the queues
    they read, so the fourth queue shows with nobody to apply its writes."""
    for shard in range(SHARDS - 1):
        sharded.serve(f"writer-{shard}", "writer", "--shard", str(shard))

    def status() -> dict[str, dict[str, object]] | None:
        said = sharded.cli("status", "--json")
        named = {c["name"]: c for c in json.loads(said.stdout)["checks"]}
        answering = named["memory writer"]["value"]
        return named if isinstance(answering, list) and len(answering) == SHARDS - 1 else None

    checks = sharded.wait_for("three writers to answer", status)
    assert checks["memory writer"]["ok"]
    assert checks["writer queues"] == {
        "name": "writer queues",
        "ok": False,
        "detail": f"memory.write.{SHARDS - 1} no consumer among the workers that answer",
        "value": {
            **{f"memory.write.{s}": 1 for s in range(SHARDS - 1)},
            f"memory.write.{SHARDS - 1}": 0,
        },
    }
    assert sharded.cli("status").returncode == 1
