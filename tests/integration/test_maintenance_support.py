"""Shared helpers (no tests) for the maintenance and forgetting integration tests."""

from __future__ import annotations

import uuid
from datetime import datetime
from pathlib import Path

from click.testing import CliRunner, Result
from sqlalchemy import Connection, Engine, Table, insert, inspect, text

from memory import consolidation
from memory.records import Candidate, Kind, Provenance, Scope, Source, Status, content_hash
from memory.store import Store
from memory.tables import memories
from tests.clock import Clock
from workers.cli import main_group

ANA = Scope("acme", "ana", "triage")
BOB = Scope("acme", "bob", "triage")


def candidate(
    content: str,
    *,
    scope: Scope = ANA,
    kind: Kind = Kind.FACT,
    key: str = "",
    source: Source = Source.OBSERVED,
    run: str = "run-1",
    subject: str = "",
    idem: str = "",
) -> Candidate:
    return Candidate(
        scope=scope,
        kind=kind,
        content=content,
        key=key,
        idempotency_key=idem,
        provenance=Provenance(
            source=source,
            run_id=run,
            task_id=run,
            agent=scope.agent,
            reference="feed#1",
            subject=subject or scope.user,
        ),
    )


def find_everywhere(engine: Engine, marker: str) -> list[str]:
    """Every place in the database where `marker` (lower case) can be read."""
    needle = marker.lower()
    hits: list[str] = []
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            names = conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type='table'")
            for (name,) in list(names):
                for row in conn.exec_driver_sql(f'SELECT * FROM "{name}"'):
                    for value in row:
                        raw = value if isinstance(value, bytes) else str(value).encode()
                        if needle.encode() in raw.lower():
                            hits.append(name)
            conn.exec_driver_sql(
                "CREATE VIRTUAL TABLE IF NOT EXISTS temp.ns_vocab "
                "USING fts5vocab(main, 'ns_memories_fts', 'row')"
            )
            terms = conn.exec_driver_sql("SELECT term FROM temp.ns_vocab").scalars()
            hits += [f"fts-term:{t}" for t in terms if needle in t]
            matches = conn.exec_driver_sql(
                "SELECT count(*) FROM ns_memories_fts WHERE ns_memories_fts MATCH ?",
                (f'"{needle}"',),
            ).scalar_one()
            hits += ["fts-match"] * matches
        else:
            for table in inspect(conn).get_table_names():
                for column in inspect(conn).get_columns(table):
                    found = conn.execute(
                        text(
                            f'SELECT count(*) FROM "{table}" WHERE lower("{column["name"]}"::text) '
                            "LIKE :p"
                        ),
                        {"p": f"%{needle}%"},
                    ).scalar_one()
                    hits += [f"{table}.{column['name']}"] * found
            tsv = conn.execute(
                text(
                    "SELECT count(*) FROM ns_memories WHERE "
                    "to_tsvector('english', content) @@ plainto_tsquery('english', :w)"
                ),
                {"w": needle},
            ).scalar_one()
            hits += ["tsvector"] * tsv
    return hits


def find_in_files(folder: Path, marker: str) -> list[str]:
    return [
        str(p)
        for p in folder.rglob("*")
        if p.is_file() and marker.lower().encode() in p.read_bytes().lower()
    ]


def insert_active(
    conn: Connection,
    content: str,
    *,
    key: str,
    now: datetime,
    table: Table = memories,
    source: Source = Source.OBSERVED,
    status: Status = Status.ACTIVE,
) -> str:
    """An active row written directly, as only a race between writers could leave it
    (into `table`: the table as an earlier revision had it, for migration tests;
    from `source`; in another `status` if given)."""
    memory_id = str(uuid.uuid4())
    conn.execute(
        insert(table).values(
            id=memory_id,
            tenant=ANA.tenant,
            user_id=ANA.user,
            agent_id=ANA.agent,
            kind=Kind.FACT.value,
            key=key,
            content=content,
            content_hash=content_hash(content),
            status=status.value,
            source=source.value,
            confidence=0.8,
            idempotency_key=f"race:{memory_id}",
            created_at=now,
            valid_from=now,
            last_reinforced_at=now,
        )
    )
    return memory_id


def nightshift(engine: Engine, *args: str) -> Result:
    """`nightshift --database-url <engine's database> ARGS…`, as a user types it."""
    url = engine.url.render_as_string(hide_password=False)
    return CliRunner().invoke(main_group, ["--database-url", url, *args])


def insert_as_stored_before(
    conn: Connection, content: str, *, user: str, subject: str, now: datetime
) -> str:
    """An active row of user `user` in acme/…/triage with `subject` exactly as given:
    how an earlier release stored what it was sent (no one spelling)."""
    memory_id = str(uuid.uuid4())
    conn.execute(
        insert(memories).values(
            id=memory_id,
            tenant="acme",
            user_id=user,
            agent_id="triage",
            kind=Kind.FACT.value,
            content=content,
            content_hash=content_hash(content),
            status=Status.ACTIVE.value,
            source=Source.STATED.value,
            confidence=1.0,
            subject=subject,
            idempotency_key=f"old:{memory_id}",
            created_at=now,
            valid_from=now,
            last_reinforced_at=now,
        )
    )
    return memory_id


MARK = "zqxpenicillin"


def seed_everything(store: Store, clock: Clock) -> None:
    """Ana's text in every shape memory can take: versions, review, merge, summary, hot."""
    for i in range(6):
        store.apply(
            [candidate(f"phoned about {MARK} dose {i}", kind=Kind.EPISODE, run=f"ep-{i}")],
            handle=f"ep-{i}",
            actor="writer",
        )
    clock.advance(days=40)
    store.apply(
        [
            candidate(
                f"Ana is allergic to {MARK}", key="ana.allergy", source=Source.STATED, run="r1"
            )
        ],
        handle="r1",
        actor="writer",
    )
    store.apply(
        [
            candidate(
                f"Ana is allergic to {MARK} and latex",
                key="ana.allergy",
                source=Source.STATED,
                run="r2",
            ),
            candidate(
                f"Ana wants {MARK}-free clinics",
                kind=Kind.PREFERENCE,
                source=Source.STATED,
                run="r2",
            ),
            candidate(f"Ana may take {MARK} daily", source=Source.INFERRED, run="r2"),
            candidate(f"{MARK} shortage at ward 3", run="r2"),
        ],
        handle="r2",
        actor="writer",
    )
    store.apply([candidate(f"{MARK} shortage at ward 3", run="r3")], handle="r3", actor="writer")
    store.apply(
        [
            candidate("Bob takes the night shift", scope=BOB, run="b1"),
            candidate(
                "Bob wants short summaries",
                scope=BOB,
                kind=Kind.PREFERENCE,
                source=Source.STATED,
                run="b1",
            ),
        ],
        handle="b1",
        actor="writer",
    )
    with store.engine.begin() as conn:
        planned = consolidation.plan(conn, "acme", clock())
        consolidation.apply(conn, planned, clock())
