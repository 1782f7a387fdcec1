"""`alembic upgrade head` on an empty database equals the models, on both dialects."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import MetaData, Table, exc, inspect, select

from memory.engine import open_engine
from memory.tables import memories
from tests.integration.test_maintenance_support import insert_active
from workers import schema
from workers.migrations_filter import include_object

pytestmark = pytest.mark.integration


def test_migrated_schema_equals_models(empty_database_url: str) -> None:
    engine = open_engine(empty_database_url)
    schema.upgrade(engine)
    with engine.connect() as conn:
        context = MigrationContext.configure(
            conn, opts={"include_object": include_object, "compare_type": True}
        )
        diff = compare_metadata(context, schema.ALL_METADATA)
    assert diff == []
    assert schema.is_current(engine)
    engine.dispose()


def test_upgrade_twice_is_harmless_and_creates_full_text(empty_database_url: str) -> None:
    engine = open_engine(empty_database_url)
    schema.upgrade(engine)
    schema.upgrade(engine)
    names = set(inspect(engine).get_table_names())
    assert {"ns_memories", "ns_runs", "ns_schedules", "ns_write_receipts", "ns_audit"} <= names
    if engine.dialect.name == "sqlite":
        assert "ns_memories_fts" in names
    else:
        indexes = {i["name"] for i in inspect(engine).get_indexes("ns_memories")}
        assert "ix_ns_memories_fts" in indexes
        with engine.connect() as conn:
            definition = conn.exec_driver_sql(
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_ns_memories_fts'"
            ).scalar_one()
        # Only active rows are searched; rows leaving `active` get no GIN entries.
        assert "USING gin (search_vector) WHERE ((status)::text = 'active'::text)" in definition
    engine.dispose()


def test_0010_repairs_slots_a_race_left_with_several_active_values(
    empty_database_url: str,
) -> None:
    engine = open_engine(empty_database_url)
    schema.upgrade(engine, "0009_search_vector_given")
    start = datetime(2026, 12, 1, tzinfo=UTC)
    with engine.begin() as conn:
        before = Table("ns_memories", MetaData(), autoload_with=conn)  # as 0009 left it
        ids = [
            insert_active(
                conn, f"plan v{i}", key="plan", now=start + timedelta(minutes=i), table=before
            )
            for i in range(3)
        ]
        other = insert_active(conn, "home is Lisbon", key="home", now=start, table=before)
        note = insert_active(conn, "a note", key="", now=start, table=before)
        twin = insert_active(conn, "another note", key="", now=start, table=before)
    schema.upgrade(engine)
    with engine.connect() as conn:
        rows = {r.id: r for r in conn.execute(select(memories))}
    newest = ids[-1]
    assert [rows[i].status for i in ids] == ["superseded", "superseded", "active"]
    assert [rows[i].superseded_by_id for i in ids[:2]] == [newest, newest]
    assert rows[ids[0]].superseded_at == rows[newest].valid_from == rows[ids[0]].valid_to
    assert rows[ids[0]].version == 2
    assert {rows[i].status for i in (other, note, twin)} == {"active"}
    with pytest.raises(exc.IntegrityError), engine.begin() as conn:
        insert_active(conn, "plan v9", key="plan", now=start + timedelta(days=1))
    engine.dispose()
