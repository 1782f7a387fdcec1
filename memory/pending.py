"""The writes of one transaction, held back and sent together when it ends.

An apply ends with four writes — its new rows, the rows they supersede, its audit
rows (`memory.write_audit`) and the receipt — none of which the apply reads again. Sent
one by one they are four round trips and four statements to plan; on PostgreSQL
`flush` sends them as one statement (`WRITE_ALL`: data-modifying CTEs over the
rows as JSON), whatever the batch size, so its text never changes. SQLite runs
in the same process, so it keeps the plain statements of `memory.queries`.

The holder (`memory.sql.SqlRows`) flushes before every read or direct update, so
a transaction never reads past a write it has not sent, and once more before it
commits. Nothing about durability changes: every write is in the transaction,
committed with it or not at all.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson
from sqlalchemy import Connection

from memory import queries
from memory.dialect import DriverStatement, array_literal
from memory.folding import folded_key
from memory.fulltext import SEARCH_VECTOR
from memory.port import AuditEntry
from memory.receipts import WriteReceipt
from memory.records import Memory, content_hash
from memory.tables import audit, memories, receipts, utc


@dataclass(slots=True)
class PendingWrites:
    """Inserts and supersessions queued inside one open transaction."""

    memories: list[Memory] = field(default_factory=list)
    successors: list[tuple[str, str, datetime]] = field(default_factory=list)
    audit: list[AuditEntry] = field(default_factory=list)
    receipts: list[WriteReceipt] = field(default_factory=list)
    # Direct changes to existing rows, by id (see `queue_update`).
    updates: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Rows the writes were decided from without reading them (`memory.known_slots`):
    # PostgreSQL's statement fails unless it finds each of them unchanged.
    expected: list[Memory] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.memories or self.successors or self.audit or self.receipts or self.updates)

    def queue_update(self, memory_id: str, changes: Mapping[str, Any]) -> bool:
        """Queue `changes` (Memory field names) to an existing row, if they can be: every
        value set (the statement keeps a column whose value is missing) and the row not
        also queued for supersession (one statement must not write a row twice). False
        when the caller must run the update itself."""
        if (
            not changes.keys() <= _UPDATABLE
            or any(v is None for v in changes.values())
            or any(old == memory_id for old, _, _ in self.successors)
        ):
            return False
        self.updates[memory_id] = {**self.updates.get(memory_id, {}), **changes}
        return True

    def flush(self, conn: Connection) -> None:
        """Send everything queued, in order of dependence, and forget it."""
        if not self:
            return
        if conn.dialect.name == "postgresql":
            _flush_postgres(conn, self)
        else:
            for memory_id, changes in self.updates.items():
                queries.update_memory(conn, memory_id, changes)
            # Superseded before the successors arrive: one active value per slot.
            by_time: dict[datetime, dict[str, str]] = {}
            for old_id, new_id, at in self.successors:
                by_time.setdefault(at, {})[old_id] = new_id
            for at, successors in by_time.items():
                queries.supersede_many(conn, successors, at)
            queries.insert_memories(conn, self.memories)
            queries.record_audit(conn, self.audit)
            for receipt in self.receipts:
                queries.save_receipt(conn, receipt)
        self.memories, self.successors, self.audit, self.receipts = [], [], [], []
        self.updates, self.expected = {}, []


_MEMORY_COLUMNS = (
    ("id", "varchar"),
    ("tenant", "varchar"),
    ("user_id", "varchar"),
    ("agent_id", "varchar"),
    ("kind", "varchar"),
    ("key", "varchar"),
    ("key_folded", "text"),
    ("content", "text"),
    ("content_hash", "varchar"),
    ("status", "varchar"),
    ("source", "varchar"),
    ("confidence", "float8"),
    ("reference", "text"),
    ("run_id", "varchar"),
    ("task_id", "varchar"),
    ("agent", "varchar"),
    ("subagent", "varchar"),
    ("schedule", "varchar"),
    ("subject", "varchar"),
    ("idempotency_key", "varchar"),
    ("version", "int4"),
    ("score", "float8"),
    ("created_at", "timestamptz"),
    ("valid_from", "timestamptz"),
    ("valid_to", "timestamptz"),
    ("superseded_at", "timestamptz"),
    ("supersedes_id", "varchar"),
    ("superseded_by_id", "varchar"),
    ("last_reinforced_at", "timestamptz"),
    ("last_used_at", "timestamptz"),
)
_AUDIT_COLUMNS = (
    ("at", "timestamptz"),
    ("actor", "varchar"),
    ("tenant", "varchar"),
    ("action", "varchar"),
    ("memory_id", "varchar"),
    ("detail", "json"),
)
_RECEIPT_COLUMNS = (
    ("handle", "varchar"),
    ("tenant", "varchar"),
    ("run_id", "varchar"),
    ("created_at", "timestamptz"),
    ("decisions", "json"),
)


def _rows(
    table: str, columns: Sequence[tuple[str, str]], computed: Mapping[str, str] | None = None
) -> str:
    """`(columns) SELECT …` from the `table` rows as `_compact` wrote them: a NOT NULL
    column a row leaves out takes the batch's value (`%(table_shared)s`), a nullable
    one is NULL. Plus the `computed` columns (name → SQL over the others). Nested
    JSON (audit detail, receipt decisions) is stored as its text, exactly as it was
    written: the `json` type keeps its input verbatim."""
    computed = computed or {}
    required = _REQUIRED[table]
    names = ", ".join([*(name for name, _ in columns), *computed])
    merged = ", ".join(
        f"coalesce(r.{name}, s.{name}) AS {name}" if name in required else f"r.{name}"
        for name, _ in columns
    )
    values = ", ".join(
        [
            *(f"{name}::text" if kind == "json" else name for name, kind in columns),
            *computed.values(),
        ]
    )
    types = ", ".join(f"{name} {kind}" for name, kind in columns)
    return (
        f"({names}) SELECT {values} FROM (SELECT {merged}"
        f" FROM json_to_recordset(%({table})s::json) AS r({types}),"
        f" json_to_record(%({table}_shared)s::json) AS s({types})) AS x"
    )


_REQUIRED = {
    name: frozenset(c.name for c in table.c if not c.nullable)
    for name, table in (("memories", memories), ("audit", audit), ("receipts", receipts))
}
"""Per table of `WRITE_ALL`, its NOT NULL columns: those `_compact` may share."""


def _compact(
    table: str, rows: Sequence[dict[str, object]]
) -> tuple[dict[str, object], list[dict[str, object]]]:
    """`rows` as `_rows` reads them: the NOT NULL values of the first row once, as the
    batch's, and each row without the NOT NULL values equal to those and without
    its NULLs. A batch's rows share most of their columns (scope, source, run,
    times), so the server parses about half the fields, and the writer encodes
    about half. A NULL in a NOT NULL column is refused here: sent, the batch's
    value would take its place."""
    if not rows:
        return {}, []
    required = _REQUIRED[table]
    shared = {name: value for name, value in rows[0].items() if name in required}
    return shared, [_kept(table, row, shared) for row in rows]


def _kept(table: str, row: dict[str, object], shared: dict[str, object]) -> dict[str, object]:
    """What of `row` `_compact` sends, given the batch's values `shared`."""
    required = _REQUIRED[table]
    kept: dict[str, object] = {}
    for name, value in row.items():
        if name in required:
            if value is None:
                raise ValueError(f"{table}.{name} is NOT NULL; a row holds None")
            if value != shared[name]:
                kept[name] = value
        elif value is not None:
            kept[name] = value
    return kept


_UPDATE_COLUMNS = (
    ("id", "varchar"),
    ("content", "text"),
    ("content_hash", "varchar"),
    ("kind", "varchar"),
    ("status", "varchar"),
    ("version", "int4"),
    ("valid_to", "timestamptz"),
    ("superseded_at", "timestamptz"),
    ("superseded_by_id", "varchar"),
)
"""The columns an apply changes on an existing row (a retry's new text, its supersession)."""
_KEEP = ", ".join(f"{name} = coalesce(u.{name}, m.{name})" for name, _ in _UPDATE_COLUMNS[1:])

_AFTER_UPDATES = "WHERE (SELECT count(*) FROM updated) + (SELECT count(*) FROM superseded) >= 0"
"""Always true; reading the two UPDATEs' results makes them run to the end before the
first new row is inserted. Data-modifying CTEs that nothing reads run in no promised
order, and a new active value inserted while its predecessor is still active would
break the one-active-value-per-slot index (`memory.tables`)."""

_UNCHANGED = "WHERE ns_rows_unchanged((SELECT count(*) FROM unchanged) = %(expected_count)s)"
"""True, or the statement fails: the rows an apply's writes were decided from without a
read (`memory.known_slots`) must all be found unchanged, or `ns_rows_unchanged`
raises a unique violation and nothing of the statement lands. On the receipt's
INSERT: an apply always writes its one receipt, so the check runs once whatever
else the apply writes (on the new rows' INSERT, an apply of duplicates only would
join no row and never call it)."""

WRITE_ALL = f"""
WITH unchanged AS (
    SELECT 1 FROM unnest(%(expected_ids)s::varchar[], %(expected_versions)s::int4[],
        %(expected_hashes)s::varchar[], %(expected_sources)s::varchar[])
        AS e(id, version, content_hash, source)
    CROSS JOIN LATERAL (SELECT m.version, m.content_hash, m.source, m.status
        FROM ns_memories AS m WHERE m.id = e.id OFFSET 0) AS m
    WHERE m.version = e.version AND m.content_hash = e.content_hash
        AND m.source = e.source AND m.status = 'active'
), updated AS (
    UPDATE ns_memories AS m SET {_KEEP}
    FROM json_to_recordset(%(updates)s::json)
        AS u({", ".join(f"{name} {kind}" for name, kind in _UPDATE_COLUMNS)})
    WHERE m.id = u.id AND m.id = ANY(%(update_ids)s::varchar[])
    RETURNING 1
), superseded AS (
    UPDATE ns_memories AS m
    SET status = 'superseded', superseded_at = s.at, valid_to = s.at,
        superseded_by_id = s.new_id, version = m.version + 1
    FROM unnest(%(old_ids)s::varchar[], %(new_ids)s::varchar[], %(at)s::timestamptz[])
        AS s(old_id, new_id, at)
    WHERE m.id = s.old_id
    RETURNING 1
), new_memories AS (
    INSERT INTO ns_memories {_rows("memories", _MEMORY_COLUMNS, {"search_vector": SEARCH_VECTOR})}
    {_AFTER_UPDATES}
), audited AS (
    INSERT INTO ns_audit {_rows("audit", _AUDIT_COLUMNS)}
)
INSERT INTO ns_write_receipts {_rows("receipts", _RECEIPT_COLUMNS)}
{_UNCHANGED}
"""
"""All of a transaction's queued writes as one statement. The CTEs touch different
rows (new rows are linked to their predecessors before they are inserted; the
UPDATE only reaches rows that existed before the statement), so running them
against one snapshot is what the separate statements did. A data-modifying CTE
runs to completion whether or not anything reads it; the UPDATEs return a row per
row changed only so that the INSERT can wait for them (`_AFTER_UPDATES`). The rows
an apply took on trust (`unchanged`) are read from the statement's snapshot, before
either UPDATE changes a row, each probed by its primary key (which `LATERAL … OFFSET
0` keeps the planner from trading for a scan of every active row), and checked as
the receipt is inserted (`_UNCHANGED`). The statement has no result set (nothing
to describe, copy or build metadata for). New rows bring their search vector, which
spares each a trigger call (`memory.fulltext.POSTGRES_VECTOR_GIVEN`).

The rows travel as one JSON text per table rather than as bound values: psycopg2
interpolates parameters into the statement, and PostgreSQL then plans every
literal of every row (milliseconds for a batch of 50), where a JSON text is one
literal, parsed once while the statement runs (one text per table, not one
document: `json -> 'key'` would parse the whole document again for each table).

Both UPDATEs reach their rows by primary key, and the statement is prepared
`by_key` (`memory.dialect.DriverStatement`), so its plan does not depend on the
table's statistics. The supersessions travel as arrays; the direct updates as
JSON, with their ids once more as an array for the primary key's `= ANY`: a JSON
set is guessed at 100 rows, and against a table planned as small the planner
would rather scan the whole table (or its whole index) than probe it 100 times."""


WRITE_ALL_PREPARED = DriverStatement.from_sql(WRITE_ALL, by_key=True)
"""Prepared once per connection: parsing and planning the statement cost about a
millisecond, a fifth of running it for a batch of 50."""


def _flush_postgres(conn: Connection, pending: PendingWrites) -> None:
    if pending.updates and any(old in pending.updates for old, _, _ in pending.successors):
        raise ValueError("a row queued for an update and a supersession at once")
    if pending.expected and len(pending.receipts) != 1:
        raise ValueError("rows taken on trust are checked as the apply's one receipt is written")
    iso = _IsoTimes()
    documents: dict[str, object] = {
        "updates": [_update_row(i, changes, iso) for i, changes in pending.updates.items()]
    }
    documents["memories_shared"], documents["memories"] = _memory_document(pending.memories, iso)
    tables: dict[str, list[dict[str, object]]] = {
        "audit": [
            {
                "at": iso(e.at),
                "actor": e.actor,
                "tenant": e.tenant,
                "action": e.action,
                "memory_id": e.memory_id,
                "detail": e.detail,
            }
            for e in pending.audit
        ],
        "receipts": [
            {
                "handle": r.handle,
                "tenant": r.tenant,
                "run_id": r.run_id,
                "created_at": iso(r.created_at),
                "decisions": [d.stored() for d in r.decisions],
            }
            for r in pending.receipts
        ],
    }
    for name, rows in tables.items():
        documents[f"{name}_shared"], documents[name] = _compact(name, rows)
    # orjson: a tenth of `json.dumps`'s time for the same text, less its spaces.
    params: dict[str, object] = {
        name: orjson.dumps(document, option=orjson.OPT_NON_STR_KEYS).decode()
        for name, document in documents.items()
    }
    # Rows locked in one order by every writer (by id): two statements superseding
    # rows of the same slots in the batch's order could each hold what the other waits for.
    successors = sorted(pending.successors)
    params.update(
        {
            "update_ids": array_literal(pending.updates),
            "old_ids": array_literal(old for old, _, _ in successors),
            "new_ids": array_literal(new for _, new, _ in successors),
            "at": array_literal(utc(at).isoformat() for _, _, at in successors),
            "expected_ids": array_literal(m.id for m in pending.expected),
            "expected_versions": array_literal(str(m.version) for m in pending.expected),
            "expected_hashes": array_literal(content_hash(m.content) for m in pending.expected),
            "expected_sources": array_literal(m.source.value for m in pending.expected),
            "expected_count": len(pending.expected),
        }
    )
    WRITE_ALL_PREPARED.execute(conn, params)


class _IsoTimes:
    """ISO text of aware UTC datetimes; a batch shares a few instants, so each is
    converted once."""

    def __init__(self) -> None:
        self.seen: dict[datetime, str] = {}

    def __call__(self, value: datetime | None) -> str | None:
        if value is None:
            return None
        text = self.seen.get(value)
        if text is None:
            text = self.seen[value] = utc(value).isoformat()
        return text


def _memory_row(m: Memory, iso: _IsoTimes) -> dict[str, object]:
    """A Memory as the columns `queries.to_values` gives, datetimes as ISO text."""
    return {
        "id": m.id,
        "tenant": m.scope.tenant,
        "user_id": m.scope.user,
        "agent_id": m.scope.agent,
        "kind": m.kind.value,
        "key": m.key,
        "key_folded": folded_key(m.key),
        "content": m.content,
        "content_hash": content_hash(m.content),
        "status": m.status.value,
        "source": m.source.value,
        "confidence": m.confidence,
        "reference": m.reference,
        "run_id": m.run_id,
        "task_id": m.task_id,
        "agent": m.agent,
        "subagent": m.subagent,
        "schedule": m.schedule,
        "subject": m.subject,
        "idempotency_key": m.idempotency_key,
        "version": m.version,
        "score": m.score,
        "created_at": iso(m.created_at),
        "valid_from": iso(m.valid_from),
        "valid_to": iso(m.valid_to),
        "superseded_at": iso(m.superseded_at),
        "supersedes_id": m.supersedes_id,
        "superseded_by_id": m.superseded_by_id,
        "last_reinforced_at": iso(m.last_reinforced_at),
        "last_used_at": iso(m.last_used_at),
    }


_BATCH_FIELDS = operator.attrgetter(
    "scope",
    "status",
    "source",
    "confidence",
    "run_id",
    "agent",
    "subagent",
    "schedule",
    "subject",
    "version",
    "score",
    "created_at",
    "valid_from",
    "last_reinforced_at",
)
"""The NOT NULL fields an apply's new rows have in common (one scope, one run, one
instant), or nearly always: a row whose values are the first row's sends none of them."""
_ROW_FIELDS = operator.attrgetter(
    "id", "kind", "key", "content", "reference", "task_id", "idempotency_key"
)
"""The NOT NULL fields each new row has of its own."""


def _memory_document(
    rows: Sequence[Memory], iso: _IsoTimes
) -> tuple[dict[str, object], list[dict[str, object]]]:
    """`_compact("memories", …)` of the rows' `_memory_row`s, without building them:
    a row that shares the first row's `_BATCH_FIELDS` sends only its own fields and
    its non-NULL nullable ones (any other row is compacted the general way). A row
    of its own is sent whole, even a value equal to the batch's: that is allowed
    (`_rows` prefers the row's), and cheaper than comparing."""
    if not rows:
        return {}, []
    first = _memory_row(rows[0], iso)
    required = _REQUIRED["memories"]
    shared = {name: value for name, value in first.items() if name in required}
    batch = _BATCH_FIELDS(rows[0])
    compact: list[dict[str, object]] = []
    for m in rows:
        if _BATCH_FIELDS(m) != batch:
            compact.append(_kept("memories", _memory_row(m, iso), shared))
            continue
        own = _ROW_FIELDS(m)
        if None in own:
            raise ValueError(f"memories row {m.id} holds None in a NOT NULL column")
        row: dict[str, object] = {
            "id": m.id,
            "kind": m.kind.value,
            "key": m.key,
            "key_folded": folded_key(m.key),
            "content": m.content,
            "content_hash": content_hash(m.content),
            "reference": m.reference,
            "task_id": m.task_id,
            "idempotency_key": m.idempotency_key,
        }
        if m.valid_to is not None:
            row["valid_to"] = iso(m.valid_to)
        if m.superseded_at is not None:
            row["superseded_at"] = iso(m.superseded_at)
        if m.supersedes_id is not None:
            row["supersedes_id"] = m.supersedes_id
        if m.superseded_by_id is not None:
            row["superseded_by_id"] = m.superseded_by_id
        if m.last_used_at is not None:
            row["last_used_at"] = iso(m.last_used_at)
        compact.append(row)
    return shared, compact


def _update_row(memory_id: str, changes: Mapping[str, Any], iso: _IsoTimes) -> dict[str, object]:
    """Queued changes as a row of `_UPDATE_COLUMNS` (absent: kept as they are)."""
    row: dict[str, object] = {"id": memory_id}
    for name, value in changes.items():
        row[name] = iso(value) if isinstance(value, datetime) else _db(value)
    if "content" in changes:
        row["content_hash"] = content_hash(changes["content"])
    return row


_UPDATABLE = frozenset(name for name, _ in _UPDATE_COLUMNS) - {"id", "content_hash"}


def _db(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value
