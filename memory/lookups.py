"""What an apply reads before it writes, on PostgreSQL, as plain driver SQL.

An apply asks which rows already hold its idempotency keys and its slots' active
values and, when applied the ordinary way (not `memory.sql`'s one statement),
whether its receipt handle was seen (a replay returns the stored receipt).

The keys travel as arrays, one entry per candidate with its scope, so the text
never changes and the statement is prepared once per connection
(`memory.dialect.DriverStatement`). Each key is looked up on its own, by the
full key of an index: the unique idempotency index, and the scope-key index for
a slot's active row. The `LATERAL … OFFSET 0` keeps each lookup a probe the
planner cannot fold into a join, and the statement is planned `by_key`; without
both, a plan made while the table was small (never analyzed) read the whole
scope and filtered the keys, a cost that grew with the scope (measured: 400 rows
read for 50 keys at 7,500 memories).

SQLite keeps the SQLAlchemy statements of `memory.queries` (no round trips to save).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC
from typing import Any

from sqlalchemy import Connection

from memory.dialect import DriverStatement, array_literal
from memory.folding import folded_key
from memory.receipts import Decision, WriteReceipt
from memory.records import Memory, Scope, Status
from memory.tables import MEMORY_COLUMNS, Timestamp

_COLUMNS = tuple(c.name for c in MEMORY_COLUMNS)
_TIMES = tuple(c.name for c in MEMORY_COLUMNS if isinstance(c.type, Timestamp))
_SELECT = ", ".join(f"m.{name}" for name in _COLUMNS)


def _probe(name: str, where: str) -> str:
    """The rows of `ns_memories` matching `where`, for each (scope, key) of the
    arrays `{name}_tenants`, `{name}_users`, `{name}_agents`, `{name}_keys`."""
    arrays = ", ".join(f"%({name}_{part})s::varchar[]" for part in _ARRAYS)
    return (
        f"SELECT {_SELECT} FROM unnest({arrays}) AS q(tenant, user_id, agent_id, key)"
        " CROSS JOIN LATERAL (SELECT * FROM ns_memories AS m"
        " WHERE m.tenant = q.tenant AND m.user_id = q.user_id AND m.agent_id = q.agent_id"
        f" AND {where} OFFSET 0) AS m"
    )


_ARRAYS = ("tenants", "users", "agents", "keys")

LISTED_SLOTS = 256
"""The most active slots a scope may hold to be listed whole by a lookup (`EXISTING`)."""

_LISTED = (
    f"SELECT {_SELECT} FROM unnest(%(listed_tenants)s::varchar[], %(listed_users)s::varchar[],"
    " %(listed_agents)s::varchar[]) AS q(tenant, user_id, agent_id)"
    " CROSS JOIN LATERAL (SELECT * FROM ns_memories AS m"
    " WHERE m.tenant = q.tenant AND m.user_id = q.user_id AND m.agent_id = q.agent_id"
    f" AND m.key <> '' AND m.status = 'active' LIMIT {LISTED_SLOTS + 1}) AS m"
)
"""Every active keyed row of each scope of the `listed_*` arrays, up to one more than
`LISTED_SLOTS` (the one-active-value-per-slot index holds exactly these rows)."""

EXISTING = DriverStatement.from_sql(
    _probe("idem", "m.idempotency_key = q.key")
    + "\nUNION ALL\n"
    + _probe("slot", "m.key_folded = q.key AND m.key <> '' AND m.status = 'active'")
    + "\nUNION ALL\n"
    + _LISTED,
    by_key=True,
)
"""Per (scope, idempotency key), the row holding it; per (scope, slot), its active row
(a slot is a folded key, `folding.folded_key`, matched by the scope-key index); and
per listed scope, all its active slots (for `memory.known_slots`)."""


RECEIPT = (
    "SELECT handle, tenant, run_id, created_at, decisions FROM ns_write_receipts"
    " WHERE handle = %(handle)s"
)


def existing(
    conn: Connection,
    idempotency: Sequence[tuple[Scope, str]],
    slots: Sequence[tuple[Scope, str]],
    listed: Sequence[Scope] = (),
) -> tuple[
    dict[tuple[Scope, str], Memory],
    dict[tuple[Scope, str], Memory],
    dict[Scope, dict[tuple[Scope, str], Memory] | None],
]:
    """`memory.queries.existing` on PostgreSQL: the same answer, one prepared statement;
    and, in the same statement, every active slot of each `listed` scope, by slot (None
    for a scope holding more than `LISTED_SLOTS`: too many to list)."""
    if not idempotency and not slots and not listed:
        return {}, {}, {}
    params: dict[str, object] = {}
    for name, pairs in (("idem", idempotency), ("slot", slots)):
        columns = (
            [scope.tenant for scope, _ in pairs],
            [scope.user for scope, _ in pairs],
            [scope.agent for scope, _ in pairs],
            [key for _, key in pairs],
        )
        params.update(
            {
                f"{name}_{part}": array_literal(values)
                for part, values in zip(_ARRAYS, columns, strict=True)
            }
        )
    params["listed_tenants"] = array_literal(scope.tenant for scope in listed)
    params["listed_users"] = array_literal(scope.user for scope in listed)
    params["listed_agents"] = array_literal(scope.agent for scope in listed)
    found: dict[str, Memory] = {}
    for row in EXISTING.execute(conn, params):
        if row[0] not in found:
            found[row[0]] = _memory(row)
    wanted_idem, wanted_slots = set(idempotency), set(slots)
    by_idem = {}
    active = {}
    listings: dict[Scope, dict[tuple[Scope, str], Memory] | None] = {s: {} for s in listed}
    for m in found.values():
        if (m.scope, m.idempotency_key) in wanted_idem:
            by_idem[(m.scope, m.idempotency_key)] = m
        if m.status is Status.ACTIVE and m.key:
            slot = (m.scope, folded_key(m.key))
            if slot in wanted_slots:
                active[slot] = m
            if (listing := listings.get(m.scope)) is not None:
                listing[slot] = m
    for scope, listing in listings.items():
        if listing is not None and len(listing) > LISTED_SLOTS:
            listings[scope] = None
    return by_idem, active, listings


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
