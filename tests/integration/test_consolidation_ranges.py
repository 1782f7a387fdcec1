"""Consolidation planning over many tenants at once: the streams read the tenants in
ranges (memory.consolidation_plan.iter_plans), and the plans must not depend on it."""

from __future__ import annotations

import pytest

from memory import consolidation
from memory.records import Kind, Scope
from memory.store import Store
from tests.clock import Clock
from tests.integration.test_maintenance_support import candidate

pytestmark = pytest.mark.integration


def test_planning_every_tenant_at_once_decides_as_planning_each_alone(
    store: Store, clock: Clock
) -> None:
    # Enough tenants that the streams read them in several ranges (iter_plans).
    for n in range(12):
        scope = Scope(f"tenant-{n:02}", "ana", "triage")
        store.apply(
            [candidate(f"disk {j} of db-{n} is full", scope=scope) for j in range(n % 4 + 2)]
            + [
                candidate(f"Disk {j} of DB-{n} is full", scope=scope, idem=f"dup-{j}")
                for j in range(2)
            ]
            + [candidate(f"handled INC-{n}-{j}", scope=scope, kind=Kind.EPISODE) for j in range(6)],
            handle=f"seed-{n}",
            actor="w",
        )
    clock.advance(days=40)
    with store.engine.begin() as conn:
        together = consolidation.plan_all(conn, clock())
        alone = [consolidation.plan(conn, p.tenant, clock()) for p in together]
    assert [p.tenant for p in together] == [f"tenant-{n:02}" for n in range(12)]

    def decided(p: consolidation.Plan) -> tuple[object, ...]:
        return (
            p.active,
            sorted((m.source_id, m.target_id, m.rule) for m in p.merges),
            sorted(c.sources for c in p.compactions),
        )

    assert [decided(p) for p in together] == [decided(p) for p in alone]
    assert all(p.counts()["same-content"] == 2 and len(p.compactions) == 1 for p in together)
