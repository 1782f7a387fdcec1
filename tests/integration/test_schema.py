"""`alembic upgrade head` on an empty database equals the models, on both dialects."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from memory.engine import open_engine
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
