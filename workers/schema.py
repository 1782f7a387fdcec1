"""The database schema of the whole system: every package's tables, migrated together."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

import memory.maintenance_tables  # noqa: F401  (registers its tables on memory.tables.metadata)
import memory.tables
import schedules.tables
import workers.tables

ALL_METADATA = [memory.tables.metadata, schedules.tables.metadata, workers.tables.metadata]
MIGRATIONS = Path(__file__).parent / "migrations"


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(engine: Engine, revision: str = "heads") -> None:
    """Bring the database to `revision` (idempotent; safe to run on every start).

    Each package adds its own migrations on a branch from the shared base, so
    "heads" (all of them) is the default target.
    """
    config = alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


def current_revisions(engine: Engine) -> frozenset[str]:
    with engine.connect() as conn:
        return frozenset(MigrationContext.configure(conn).get_current_heads())


def head_revisions() -> frozenset[str]:
    return frozenset(ScriptDirectory.from_config(alembic_config("sqlite://")).get_heads())


def is_current(engine: Engine) -> bool:
    return current_revisions(engine) == head_revisions()
