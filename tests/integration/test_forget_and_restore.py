"""Forgetting outlives backups, from the command line: a refused forget leaves no
tombstone behind, and restoring exports never brings a forgotten person back,
whatever order they are imported in. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import Result
from sqlalchemy import Engine, func, select

from memory import hot
from memory.engine import open_engine
from memory.maintenance_tables import tombstones
from memory.records import Scope, Source
from memory.store import Store
from memory.tables import audit
from tests.clock import Clock
from tests.integration.test_maintenance_support import (
    ANA,
    BOB,
    MARK,
    candidate,
    find_everywhere,
    nightshift,
    seed_everything,
)
from tests.services import postgres_database
from workers import schema

pytestmark = pytest.mark.integration


@pytest.fixture
def restored(database_url: str, tmp_path: Path) -> Iterator[Engine]:
    """A second, empty database of the same dialect: where backups are restored."""
    if database_url.startswith("sqlite"):
        engine = open_engine(f"sqlite:///{tmp_path / 'restored.db'}")
        schema.upgrade(engine)
        yield engine
        engine.dispose()
        return
    with postgres_database() as url:
        engine = open_engine(url)
        yield engine
        engine.dispose()


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


def restore(engine: Engine, path: Path) -> Result:
    return nightshift(engine, "memory", "import", str(path))


def seen(engine: Engine, scope: Scope) -> list[tuple[str, str, str]]:
    """Every row of `scope` as `memory show --all` lists it, and the scope's hot summary."""
    flags = ["--tenant", scope.tenant, "--user", scope.user, "--agent", scope.agent]
    done = nightshift(engine, "memory", "show", *flags, "--all", "--json")
    assert done.exit_code == 0, done.output
    rows = sorted((m["id"], m["status"], m["content"]) for m in json.loads(done.output))
    with engine.connect() as conn:
        rows += [("hot", "", h.content) for h in hot.read(conn, scope)]
    return rows


def test_restoring_an_old_export_then_a_new_one_leaves_the_person_forgotten(
    store: Store, clock: Clock, restored: Engine, tmp_path: Path
) -> None:
    seed_everything(store, clock)  # versions, review items, a merge, a summary, hot
    old = export(store.engine, tmp_path / "old.jsonl")
    forgot = forget(store.engine, "--subject", "ana", "--as", "person:ana")
    assert forgot.exit_code == 0, forgot.output
    deleted = json.loads(forgot.output)["deleted"]
    new = export(store.engine, tmp_path / "new.jsonl")
    assert MARK in old.read_text() and MARK not in new.read_text()

    first, second = restore(restored, old), restore(restored, new)

    assert first.exit_code == 0 and second.exit_code == 0, (first.output, second.output)
    assert f"forgot again {deleted} memories" in second.output
    assert find_everywhere(restored, MARK) == []
    hits = nightshift(
        restored, "memory", "search", "--tenant", "acme", "--user", "ana", "--agent", "triage",
        MARK, "--json",
    )  # fmt: skip
    assert hits.exit_code == 0 and json.loads(hits.output) == []
    # As if the forget had happened here: the same rows and hot summaries as the source.
    for scope in (ANA, BOB):
        assert seen(restored, scope) == seen(store.engine, scope)
    again = restore(restored, new)  # importing it again changes nothing
    assert again.exit_code == 0 and "forgot again" not in again.output
    # The other order: the old export is refused once the new one is in.
    assert restore(restored, old).exit_code == 3


def test_a_tombstone_that_names_nothing_is_refused_where_it_cannot_be_applied(
    store: Store, clock: Clock, restored: Engine, tmp_path: Path
) -> None:
    """An export from a release that did not name what a forget deleted."""
    seed(store)
    old = export(store.engine, tmp_path / "old.jsonl")
    assert forget(store.engine, "--subject", "ana", "--as", "person:ana").exit_code == 0
    new = export(store.engine, tmp_path / "new.jsonl")
    lines = [json.loads(line) for line in new.read_text().splitlines()]
    for line in lines:
        if line.get("table") == "ns_tombstones":
            del line["row"]["memory_ids"]
    unnamed = tmp_path / "unnamed.jsonl"
    unnamed.write_text("".join(json.dumps(line) + "\n" for line in lines))

    assert restore(restored, old).exit_code == 0
    refused = restore(restored, unnamed)

    assert refused.exit_code == 3
    assert "cannot be applied here" in refused.output
    assert "Import this export into a database without the tenant's memory" in refused.output
    assert "Ana's blood type is AB-" in [c for _, _, c in seen(restored, ANA)]
    with restored.begin() as conn:  # start again, as the message says
        conn.execute(tombstones.delete())
        for table in ("ns_audit", "ns_write_receipts", "ns_hot_summaries", "ns_memories"):
            conn.exec_driver_sql(f"DELETE FROM {table}")
    assert restore(restored, unnamed).exit_code == 0
    assert seen(restored, ANA) == seen(store.engine, ANA)
