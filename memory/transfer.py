"""Export and import whole tenants as JSON lines, for backups and for moving a
tenant between SQLite and PostgreSQL.

Every table of `memory.tables.metadata` that has a `tenant` column travels, rows
exactly as stored: ids, provenance, superseded history, review items, audit.
One line per row: `{"table": "ns_memories", "row": {...}}`, preceded by a header
line naming the format version and the tenant. Import inserts rows that are not
there yet (by primary key) in one transaction, so importing the same file twice
changes nothing, and a failed import changes nothing. A memory's slot
(`key_folded`) is computed here from its key, whatever the file says: an export
made before slots were folded has none. Where the file's active values crowd a
slot — an export made before 0013, holding "diet" and "Diet" both active — the
slot is settled as migration 0013 settles it (`memory.slot_repair`), not left to
the one-active-value index to drop a row silently.

An export file is text anyone can edit, so every row meets the write gate's rules
on what any memory may hold (`memory.policy.judge_kept`: no secret, no instruction
read from content or given by anyone but the person or the operator), and no row
of any table may hold a secret: the first that breaks one refuses the file whole,
naming its line.

Forgetting outlives backups, in whichever order they are restored. An export
carries the tenant's tombstones:
- a file that lacks one this database holds (a person's or the operator's forget
  made after the export) is refused whole, since importing it would bring that
  memory back;
- a file that brings one this database lacks (an export made after a forget,
  imported on top of one made before it) has that forget applied here too: the
  memories the tombstone names are deleted again (`memory.forget_replay`). Where
  a tombstone from before names were recorded arrives at a database that already
  holds the tenant's memory, the import is refused: what it deleted is unknown.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Connection, DateTime, Engine, Integer, Table, and_, insert, or_, select
from sqlalchemy.types import TypeDecorator

from memory import slot_repair
from memory.dialect import insert_ignoring_conflicts
from memory.engine import autocommit
from memory.folding import folded_key
from memory.forget_replay import replay, unnamed
from memory.maintenance_tables import tombstones
from memory.policy import judge_kept, secret_kinds
from memory.records import Candidate, Kind, Provenance, Scope, Source
from memory.storable import text_problems
from memory.tables import memories, metadata

FORMAT = "nightshift.tenant-export/1"
BATCH = 1000


class ImportFormatError(ValueError):
    """An export file that cannot be imported; says which line and why."""


class ImportRefused(ValueError):
    """An import that would bring back memory a person or the operator had forgotten,
    or keep what the write gate never lets in (`memory.policy.judge_kept`)."""


@dataclass(frozen=True, slots=True)
class ImportReport:
    """Rows read and inserted per table, and `forgotten_again`: memories the file's
    tombstones name that were here and were deleted again."""

    tenant: str
    read: dict[str, int]
    inserted: dict[str, int]
    forgotten_again: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "read": self.read,
            "inserted": self.inserted,
            "forgotten_again": self.forgotten_again,
        }


def tenant_tables() -> list[Table]:
    """The tables that hold a tenant's data, in an order that respects references."""
    return [t for t in metadata.sorted_tables if "tenant" in t.c]


def export_tenant(conn: Connection, tenant: str) -> Iterator[str]:
    """JSON lines for everything `tenant` owns."""
    yield json.dumps({"format": FORMAT, "tenant": tenant})
    for table in tenant_tables():
        order = list(table.primary_key.columns)
        query = select(table).where(table.c.tenant == tenant).order_by(*order)
        for row in conn.execute(query).mappings():
            yield json.dumps({"table": table.name, "row": _encode(table, row)}, sort_keys=True)


def import_tenant(
    conn: Connection, lines: Iterable[str], *, now: datetime | None = None
) -> ImportReport:
    """Insert the rows of an export (inside the caller's transaction), then forget
    again what the file's tombstones name. `now` stamps what that rebuilds (hot
    summaries); the current time by default. After a commit that forgot anything
    again, `memory.forgetting.compact_fulltext` clears the full-text structures."""
    tables = {t.name: t for t in tenant_tables()}
    iterator = iter(enumerate(lines, start=1))
    tenant = _header(next(iterator, (1, "")))
    unnamed_here = set(
        conn.execute(
            select(tombstones.c.id).where(
                tombstones.c.tenant == tenant, tombstones.c.memory_ids.is_(None)
            )
        ).scalars()
    )
    held_memory = (
        conn.execute(select(memories.c.id).where(memories.c.tenant == tenant).limit(1)).first()
        is not None
    )
    read: dict[str, int] = {}
    inserted: dict[str, int] = {}
    pending: dict[str, list[dict[str, Any]]] = {}
    known_tombstones: set[str] = set()
    crowding: list[dict[str, Any]] = []
    for number, line in iterator:
        if not line.strip():
            continue
        name, row = _record(number, line, tables, tenant)
        if name == tombstones.name:
            known_tombstones.add(row["id"])
        read[name] = read.get(name, 0) + 1
        pending.setdefault(name, []).append(row)
        if len(pending[name]) >= BATCH:
            inserted[name] = inserted.get(name, 0) + _insert(
                conn, tables[name], pending.pop(name), crowding
            )
    for name, rows in pending.items():
        inserted[name] = inserted.get(name, 0) + _insert(conn, tables[name], rows, crowding)
    if settled := _settle_crowded(conn, crowding):
        inserted[memories.name] = inserted.get(memories.name, 0) + settled
    _refuse_if_forgotten_since(conn, tenant, known_tombstones)
    if held_memory:
        _refuse_if_unnamed(conn, tenant, known_tombstones - unnamed_here)
    again = replay(conn, tenant, known_tombstones, now or datetime.now(UTC))
    return ImportReport(tenant, read, inserted, again)


def _refuse_if_forgotten_since(conn: Connection, tenant: str, in_file: set[str]) -> None:
    """An export carries the tenant's tombstones. One this database holds and the file
    does not is a forget made after the export (or elsewhere): importing the file
    would bring that memory back, so the caller's transaction must roll back.
    Maintenance purges (expired rows) do not count: those rows would only expire
    again; nor does a forget that deleted nothing: there is nothing to bring back."""
    later = conn.execute(
        select(tombstones.c.id, tombstones.c.at, tombstones.c.actor, tombstones.c.selector)
        .where(
            tombstones.c.tenant == tenant,
            tombstones.c.role != "maintenance",
            tombstones.c.deleted > 0,
        )
        .order_by(tombstones.c.at)
    ).all()
    missing = [t for t in later if t.id not in in_file]
    if missing:
        last = missing[-1]
        raise ImportRefused(
            f"tenant {tenant!r} had memory forgotten after this export was made"
            f" ({len(missing)} forget(s), the latest at {last.at.isoformat()} by"
            f" {last.actor}, by {last.selector}): importing it would bring that memory back."
            " Export the tenant again and import that file"
        )


def _refuse_if_unnamed(conn: Connection, tenant: str, arrived: set[str]) -> None:
    """A tombstone written before tombstones named what they deleted, arriving at a
    database that already holds the tenant's memory: it may hold what that forget
    deleted, and nothing says which rows those are."""
    if not (blind := unnamed(conn, tenant, arrived)):
        return
    last = blind[-1]
    raise ImportRefused(
        f"this export of tenant {tenant!r} records {len(blind)} forget(s) this database has"
        f" not applied (the latest at {last.at.isoformat()} by {last.actor}), made before"
        " nightshift named what a forget deleted, so they cannot be applied here, and"
        " importing the file would keep what they forgot. Import this export into a"
        " database without the tenant's memory instead (older exports are then refused)"
    )


def refresh_statistics(engine: Engine, report: ImportReport) -> None:
    """After an import has committed, PostgreSQL: ANALYZE every table it added rows
    to, as after any bulk load. The planner then knows the new size at once, not at
    autovacuum's next pass; and the prepared statements of running workers, whose
    plans were made for the old size, are planned again (ANALYZE invalidates them).
    A load planned on an empty table and run after 200,000 rows arrived took 61 ms
    until the table was analyzed, 2 ms after. SQLite plans every statement afresh."""
    if engine.dialect.name != "postgresql":
        return
    tables = [name for name, count in sorted(report.inserted.items()) if count]
    with autocommit(engine) as conn:
        for name in tables:
            conn.exec_driver_sql(f'ANALYZE "{name}"')


def _header(first: tuple[int, str]) -> str:
    try:
        header = json.loads(first[1])
    except (json.JSONDecodeError, RecursionError):
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise ImportFormatError(f"line 1: not a nightshift tenant export (expected {FORMAT})")
    return str(header["tenant"])


def _record(
    number: int, line: str, tables: dict[str, Table], tenant: str
) -> tuple[str, dict[str, Any]]:
    try:
        record = json.loads(line)
        name, row = record["table"], record["row"]
    except (json.JSONDecodeError, KeyError, TypeError, RecursionError) as error:
        raise ImportFormatError(f"line {number}: not an export record ({error})") from None
    if name not in tables:
        raise ImportFormatError(f"line {number}: unknown table {name!r}")
    if row.get("tenant") != tenant:
        raise ImportFormatError(
            f"line {number}: row of tenant {row.get('tenant')!r} in an export of {tenant!r}"
        )
    unknown = set(row) - set(tables[name].c.keys())
    if unknown:
        raise ImportFormatError(f"line {number}: {name} has no column {sorted(unknown)[0]!r}")
    try:
        decoded = _decode(tables[name], row)
    except ValueError as error:
        raise ImportFormatError(f"line {number}: {name}.{error}") from None
    _admit(number, tables[name], decoded)
    return name, decoded


def _admit(number: int, table: Table, row: dict[str, Any]) -> None:
    """Refuse a row the write gate would not have stored: a file is text anyone can
    edit, so its rows are held to the gate's rules on what every memory may hold
    (`memory.policy.judge_kept`), and no row of any table may hold a secret."""
    if kinds := secret_kinds(row):
        raise ImportRefused(
            f"line {number}: a {table.name} row holds a secret ({', '.join(kinds)});"
            " secrets are never stored"
        )
    if table is not memories:
        return
    try:
        candidate = Candidate(
            Scope(row.get("tenant", ""), row.get("user_id", ""), row.get("agent_id", "")),
            Kind(row.get("kind", "")),
            row.get("content", ""),
            Provenance(Source(row.get("source", "")), reference=row.get("reference") or ""),
            key=row.get("key") or "",
        )
    except ValueError as error:
        raise ImportFormatError(f"line {number}: {table.name}.{error}") from None
    if (verdict := judge_kept(candidate)) is not None:
        raise ImportRefused(
            f"line {number}: the write gate would not keep this {candidate.kind} from source"
            f" {candidate.provenance.source}: {verdict.reason} (rule {verdict.rule})"
        )


def _decode(table: Table, row: dict[str, Any]) -> dict[str, Any]:
    """`row` as the table's columns take it: times parsed, texts checked (a NUL, a lone
    surrogate or a text longer than its column would fail the whole import as a
    database error, or be kept by SQLite alone). A problem raises ValueError
    naming the column."""
    decoded = {}
    for column, value in row.items():
        kind = table.c[column].type
        if isinstance(value, str) and _is_datetime(table, column):
            try:
                value = datetime.fromisoformat(value)
            except ValueError:
                raise ValueError(f"{column} is not an ISO 8601 time") from None
            if value.utcoffset() is None:
                raise ValueError(f"{column} has no time zone")
        elif isinstance(value, str):
            limit = getattr(kind, "length", None) or len(value)
            if problems := text_problems(column, value, limit):
                raise ValueError("; ".join(problems))
        decoded[column] = value
    if table is memories:
        decoded["key_folded"] = folded_key(decoded.get("key", ""))
    return decoded


def _insert(
    conn: Connection, table: Table, rows: list[dict[str, Any]], crowding: list[dict[str, Any]]
) -> int:
    """Insert the rows not there yet; memories an active value of their slot turned
    away are added to `crowding` (inserted later, settled: `_settle_crowded`)."""
    key = list(table.primary_key.columns)[0]
    if not _is_serial(table):
        done = set(insert_ignoring_conflicts(conn, table, rows, returning=key.name))
        if table is memories:
            crowding += (r for r in rows if r["id"] not in done and _active_keyed(r))
        return len(done)
    # A serial id (the audit trail) means nothing in another database: rows get new
    # ids there, and a row equal in every other column is the same row imported again.
    fresh = [
        r
        for r in ({k: v for k, v in row.items() if k != key.name} for row in rows)
        if conn.execute(
            select(key)
            .where(
                *(table.c[k] == v if v is not None else table.c[k].is_(None) for k, v in r.items())
            )
            .limit(1)
        ).first()
        is None
    ]
    if fresh:
        conn.execute(insert(table), fresh)
    return len(fresh)


def _active_keyed(row: dict[str, Any]) -> bool:
    return row.get("status") == "active" and bool(row.get("key"))


def _settle_crowded(conn: Connection, turned_away: list[dict[str, Any]]) -> int:
    """Insert the file's active values that found their slot taken, settling each slot
    (`slot_repair.repair`); returns how many were inserted. A row turned away for
    another reason (its id or idempotency key already here) stays out, as before."""
    crowding = [
        r
        for r in turned_away
        if conn.execute(
            select(memories.c.id).where(
                or_(
                    memories.c.id == r["id"],
                    and_(
                        memories.c.tenant == r["tenant"],
                        memories.c.user_id == r["user_id"],
                        memories.c.agent_id == r["agent_id"],
                        memories.c.idempotency_key == r["idempotency_key"],
                    ),
                )
            )
        ).first()
        is None
    ]
    if crowding:
        slot_repair.repair(conn, (), actor="import", now=datetime.now(UTC), arriving=crowding)
    return len(crowding)


def _is_serial(table: Table) -> bool:
    """A key of one integer the database numbers (not a composite key: a hot summary's
    is its scope's three columns)."""
    keys = list(table.primary_key.columns)
    return (
        len(keys) == 1
        and isinstance(keys[0].type, Integer)
        and keys[0].autoincrement in (True, "auto")
    )


def _is_datetime(table: Table, name: str) -> bool:
    kind = table.c[name].type
    return isinstance(kind, DateTime) or (
        isinstance(kind, TypeDecorator) and isinstance(kind.impl_instance, DateTime)
    )


def _encode(table: Table, row: Any) -> dict[str, Any]:
    return {k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()}
