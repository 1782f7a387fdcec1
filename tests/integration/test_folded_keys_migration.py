"""Revision 0013 on both dialects: every key gets its folded form, and slots that
the folding crowds with several active values are settled as the writer would have
settled them (`memory.slot_repair`): a statement beats a newer inference, which
goes to review; otherwise the newer value supersedes, linked both ways."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from alembic import command
from sqlalchemy import Connection, MetaData, Table, exc, select

from memory.engine import open_engine
from memory.records import Source, Status
from memory.store import Store
from memory.tables import audit, memories
from tests.integration.test_maintenance_support import ANA, insert_active
from workers import schema

pytestmark = pytest.mark.integration

START = datetime(2026, 12, 1, tzinfo=UTC)


def _row(
    conn: Connection, table: Table, key: str, source: str, minute: int, status: str = "active"
) -> str:
    """A row of `source` written `minute`s after START, as a release before 0013 stored
    it (into the table as it then was)."""
    return insert_active(
        conn,
        f"{key} from {source} at {minute}",
        key=key,
        now=START + timedelta(minutes=minute),
        table=table,
        source=Source(source),
        status=Status(status),
    )


def test_0013_folds_keys_and_settles_crowded_slots(empty_database_url: str) -> None:
    engine = open_engine(empty_database_url)
    schema.upgrade(engine, "0012_tombstone_memory_ids")
    with engine.begin() as conn:
        before = Table("ns_memories", MetaData(), autoload_with=conn)
        history = _row(conn, before, "diet", "stated", 0, status="superseded")
        stated = _row(conn, before, "diet", "stated", 1)
        inferred = _row(conn, before, "Diet", "inferred", 2)
        observed = _row(conn, before, "DIET ", "observed", 3)
        home_agent = _row(conn, before, "home", "observed", 1)
        home_person = _row(conn, before, "Ｈｏｍｅ", "stated", 2)
        plan_person = _row(conn, before, "plan", "stated", 1)
        plan_agent = _row(conn, before, "Plan", "inferred", 2)
        plan_operator = _row(conn, before, "PLAN\u200b", "operator", 3)
        loose = [_row(conn, before, "", "observed", i) for i in range(2)]
        lg_item = _row(conn, before, "lg:prefs:Theme", "inferred", 1)
        lg_other = _row(conn, before, "lg:prefs:theme", "inferred", 2)
    schema.upgrade(engine)
    with engine.connect() as conn:
        rows = {r.id: r for r in conn.execute(select(memories))}
        audited = {(a.memory_id, a.action) for a in conn.execute(select(audit))}

    assert rows[observed].key_folded == rows[inferred].key_folded == "diet"
    assert rows[home_person].key_folded == "home" and rows[home_person].key == "Ｈｏｍｅ"
    assert rows[loose[0]].key_folded == ""
    # A statement beats the newer inferences: they wait for review, nothing is lost.
    assert rows[stated].status == "active" and rows[stated].version == 1
    assert [rows[i].status for i in (inferred, observed)] == ["pending_review"] * 2
    assert rows[history].status == "superseded"
    # The person's later statement supersedes the agent's value, linked both ways.
    assert rows[home_agent].status == "superseded"
    assert rows[home_agent].superseded_by_id == home_person
    assert rows[home_person].supersedes_id == home_agent
    assert rows[home_agent].valid_to == rows[home_person].valid_from
    assert rows[home_agent].superseded_at == rows[home_person].valid_from
    assert rows[home_agent].version == 2
    # The operator's later value supersedes the person's; the agent's between them waits.
    assert [rows[i].status for i in (plan_person, plan_agent, plan_operator)] == [
        "superseded",
        "pending_review",
        "active",
    ]
    assert rows[plan_person].superseded_by_id == plan_operator
    assert rows[plan_operator].supersedes_id == plan_person
    # LangGraph item keys are case sensitive: two items, both active.
    assert {rows[i].status for i in (lg_item, lg_other, *loose)} == {"active"}
    assert {
        (home_agent, "supersede"),
        (plan_person, "supersede"),
        (inferred, "review.queued"),
        (observed, "review.queued"),
        (plan_agent, "review.queued"),
    } <= audited
    assert not {(stated, "supersede"), (home_person, "supersede")} & audited

    store = Store(engine)
    assert [m.id for m in store.history(ANA, "ｄｉｅｔ")] == [history, stated, inferred, observed]
    assert [m.id for m in store.history(ANA, " HOME")] == [home_agent, home_person]
    with pytest.raises(exc.IntegrityError), engine.begin() as conn:
        _row(conn, memories, "dIeT", "stated", 9)
    engine.dispose()


def test_0013_downgrades_to_exact_keys(empty_database_url: str) -> None:
    engine = open_engine(empty_database_url)
    schema.upgrade(engine)
    with engine.begin() as conn:
        first = _row(conn, memories, "diet", "stated", 1)
    config = schema.alembic_config(engine.url.render_as_string(hide_password=False))
    with engine.begin() as conn:
        config.attributes["connection"] = conn
        command.downgrade(config, "0012_tombstone_memory_ids")
    with engine.begin() as conn:
        before = Table("ns_memories", MetaData(), autoload_with=conn)
        assert "key_folded" not in before.c
        _row(conn, before, "Diet", "stated", 2)  # exact keys: another slot again
    schema.upgrade(engine)
    with engine.connect() as conn:
        statuses = dict(conn.execute(select(memories.c.id, memories.c.status)).all())
    assert statuses[first] == "superseded"
    engine.dispose()
