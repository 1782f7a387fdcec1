"""What an apply reads before it writes, on PostgreSQL, as plain driver SQL.

An apply asks which rows already hold its idempotency keys and its slots' active
values and, when applied the ordinary way (not `memory.sql`'s one statement),
whether its receipt handle was seen (a replay returns the stored receipt). Both
are small reads of a few index entries; built as SQLAlchemy
expressions (an `OR` arm per scope, an `IN` list per arm, a new statement for
every batch) their construction, cache-key and result handling cost more than
the query. Here the text depends only on how many scopes the batch has (usually
one) and the keys travel as one array per scope (`= ANY`), read by the unique
idempotency index and the scope-key index. (A join against `unnest` of the keys
was tried: on a table not yet analyzed the planner nests it the wrong way round.)

Not prepared (`memory.dialect.DriverStatement`), unlike the load: on a table not
yet analyzed the generic plan of the idempotency arm reads the scope's rows and
filters the keys instead of seeking them, and the read runs beside the gate
(`memory.meanwhile`), where its planning costs the apply no time (measured: the
same batches alternately prepared and not, within 2%).

SQLite keeps the SQLAlchemy statements of `memory.queries` (no round trips to save).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from datetime import UTC
from typing import Any

from sqlalchemy import Connection

from memory.receipts import Decision, WriteReceipt
from memory.records import Memory, Scope, Status
from memory.tables import Timestamp, memories

_COLUMNS = tuple(c.name for c in memories.c if c.name != "search_vector")
_TIMES = tuple(c.name for c in memories.c if isinstance(c.type, Timestamp))
_SELECT = ", ".join(f"m.{name}" for name in _COLUMNS)


@functools.lru_cache(maxsize=8)
def _existing_sql(scopes: int) -> str:
    """Per scope of the batch, its rows holding any of the idempotency keys (the
    unique idempotency index) and the active rows of its slots (the scope-key index)."""
    arms = []
    for i in range(scopes):
        scope = f"m.tenant = %(t{i})s AND m.user_id = %(u{i})s AND m.agent_id = %(a{i})s"
        arms.append(
            f"SELECT {_SELECT} FROM ns_memories AS m WHERE {scope}"
            f" AND m.idempotency_key = ANY(%(idem{i})s::varchar[])"
        )
        arms.append(
            f"SELECT {_SELECT} FROM ns_memories AS m WHERE {scope}"
            f" AND m.key = ANY(%(slot{i})s::varchar[]) AND m.key <> ''"
            " AND m.status = 'active'"
        )
    return "\nUNION ALL\n".join(arms)


RECEIPT = (
    "SELECT handle, tenant, run_id, created_at, decisions FROM ns_write_receipts"
    " WHERE handle = %(handle)s"
)


def existing(
    conn: Connection,
    idempotency: Sequence[tuple[Scope, str]],
    slots: Sequence[tuple[Scope, str]],
) -> tuple[dict[tuple[Scope, str], Memory], dict[tuple[Scope, str], Memory]]:
    """`memory.queries.existing` on PostgreSQL: the same answer, a statement whose text
    depends only on the number of scopes (a batch usually has one)."""
    if not idempotency and not slots:
        return {}, {}
    keys: dict[Scope, tuple[list[str], list[str]]] = {}
    for scope, key in idempotency:
        keys.setdefault(scope, ([], []))[0].append(key)
    for scope, key in slots:
        keys.setdefault(scope, ([], []))[1].append(key)
    params: dict[str, object] = {}
    for i, (scope, (idem, slot)) in enumerate(keys.items()):
        params.update({f"t{i}": scope.tenant, f"u{i}": scope.user, f"a{i}": scope.agent})
        params[f"idem{i}"] = idem
        params[f"slot{i}"] = slot
    found: dict[str, Memory] = {}
    for row in conn.exec_driver_sql(_existing_sql(len(keys)), params):
        if row[0] not in found:
            found[row[0]] = _memory(row)
    wanted_idem, wanted_slots = set(idempotency), set(slots)
    by_idem = {}
    active = {}
    for m in found.values():
        if (m.scope, m.idempotency_key) in wanted_idem:
            by_idem[(m.scope, m.idempotency_key)] = m
        if m.status is Status.ACTIVE and (m.scope, m.key) in wanted_slots:
            active[(m.scope, m.key)] = m
    return by_idem, active


def get_receipt(conn: Connection, handle: str) -> WriteReceipt | None:
    """`memory.queries.get_receipt` on PostgreSQL."""
    row = conn.exec_driver_sql(RECEIPT, {"handle": handle}).first()
    if row is None:
        return None
    return WriteReceipt(
        handle=row[0],
        tenant=row[1],
        run_id=row[2],
        created_at=row[3].astimezone(UTC),
        decisions=tuple(Decision.from_json(d) for d in json.loads(row[4])),
    )


def _memory(row: Sequence[Any]) -> Memory:
    return driver_memory(_COLUMNS, row)


def driver_memory(names: Sequence[str], values: Sequence[Any]) -> Memory:
    """A row read on the driver (column names, values) as a `Memory`, its times in
    UTC as `Timestamp` would give them (the driver returns the session's time zone).
    Columns that are not the memory's (a load's rank, its pool) are ignored."""
    row = dict(zip(names, values, strict=True))
    for name in _TIMES:
        if row[name] is not None:
            row[name] = row[name].astimezone(UTC)
    return Memory.from_row(row)
