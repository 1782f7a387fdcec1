"""Forgetting outlives backups, from the command line: a refused forget leaves no
tombstone behind, and restoring exports never brings a forgotten person back,
whatever order they are imported in. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import Result
from sqlalchemy import Engine, func, select

from memory.maintenance_tables import tombstones
from memory.records import Source
from memory.store import Store
from memory.tables import audit
from tests.clock import Clock
from tests.integration.test_maintenance_support import ANA, BOB, candidate, nightshift

pytestmark = pytest.mark.integration


def export(engine: Engine, path: Path) -> Path:
    done = nightshift(engine, "memory", "export", "--tenant", "acme", "--whole-tenant")
    assert done.exit_code == 0, done.output
    path.write_text(done.output)
    return path


def forget(engine: Engine, *args: str) -> Result:
    return nightshift(engine, "memory", "forget", "--tenant", "acme", *args, "--json")


def tombstone_count(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(tombstones)).scalar_one())


def seed(store: Store) -> None:
    store.apply(
        [
            candidate("Ana's blood type is AB-", source=Source.STATED),
            candidate("Bob's badge is 9911", scope=BOB),
        ],
        handle="h",
        actor="writer",
    )


def test_a_refused_forget_is_audited_and_leaves_no_tombstone(
    store: Store, clock: Clock, tmp_path: Path
) -> None:
    seed(store)
    before = export(store.engine, tmp_path / "before.jsonl")

    refused = forget(store.engine, "--subject", "ana", "--as", "person:bob")

    assert refused.exit_code == 1
    assert "may forget only memory about 'bob'" in refused.output
    assert "nothing was forgotten and no tombstone written" in refused.output
    assert tombstone_count(store.engine) == 0
    with store.engine.connect() as conn:
        [detail] = conn.execute(
            select(audit.c.detail).where(
                audit.c.action == "forget.refused", audit.c.actor == "person:bob"
            )
        ).scalars()
    assert json.loads(detail) == {"by": "subject", "value": "ana", "rule": "not-about-requester"}
    assert [m.content for m in store.show(ANA)] == ["Ana's blood type is AB-"]

    # A forget that matched nothing is recorded, and brings nothing back to guard.
    nothing = forget(store.engine, "--text", "no such words", "--as", "person:ana")
    assert nothing.exit_code == 0 and json.loads(nothing.output)["deleted"] == 0
    imported = nightshift(store.engine, "memory", "import", str(before))
    assert imported.exit_code == 0, imported.output
