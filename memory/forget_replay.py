"""Forgets a database did not see, applied when their tombstones arrive by import.

A tombstone names the memories its forget deleted (`memory_ids`: ids, never
text). Restoring backups can bring a tombstone to a database that still holds
what it deleted: an export made before a forget is imported, then one made after
it. Its rows are inserted, not deleted, so the second import alone would leave
the forgotten person in place. `replay` deletes the named memories that are
here, through the forget's own `remove` (merges handed over, episode and hot
summaries rebuilt without them, their audit rows redacted), leaving the
database as if the forget had happened in it.

Tombstones written before ids were recorded (revision 0012) cannot be replayed;
`unnamed` finds the ones that deleted a person's or the operator's memory, for
the import to refuse.

    deleted_again = replay(conn, "acme", tombstone_ids, now)
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from memory.forget_removal import chunks, remove
from memory.maintenance_tables import tombstones
from memory.tables import memories


def ids_text(ids: Iterable[str]) -> str:
    """A tombstone's `memory_ids`: the deleted ids as a JSON list, sorted."""
    return json.dumps(sorted(ids))


def replay(conn: Connection, tenant: str, tombstone_ids: Collection[str], now: datetime) -> int:
    """Delete, in the caller's transaction, every memory of `tenant` that one of
    `tombstone_ids` names and that is here; return how many. One tombstone's ids
    at a time: what is held is bounded by the largest forget and by what is found,
    not by the tenant's history."""
    doomed: set[str] = set()
    for chunk in chunks(tombstone_ids):
        query = select(tombstones.c.memory_ids).where(
            tombstones.c.tenant == tenant,
            tombstones.c.id.in_(chunk),
            tombstones.c.memory_ids.is_not(None),
        )
        for named in conn.execute(query).scalars():
            doomed |= _present(conn, tenant, json.loads(named))
    if not doomed:
        return 0
    deleted, _ = remove(conn, doomed, tenant, now)
    return len(deleted)


def unnamed(conn: Connection, tenant: str, tombstone_ids: Collection[str]) -> list[Any]:
    """Of `tombstone_ids`, the person's or operator's forgets that deleted memory
    without naming it (written before revision 0012), oldest first. A purge's are
    left out: what it deleted had expired, and expires again."""
    found: list[Any] = []
    for chunk in chunks(tombstone_ids):
        query = select(tombstones.c.id, tombstones.c.at, tombstones.c.actor).where(
            tombstones.c.tenant == tenant,
            tombstones.c.id.in_(chunk),
            tombstones.c.memory_ids.is_(None),
            tombstones.c.deleted > 0,
            tombstones.c.role != "maintenance",
        )
        found += conn.execute(query).all()
    return sorted(found, key=lambda t: t.at)


def _present(conn: Connection, tenant: str, ids: Iterable[str]) -> set[str]:
    out: set[str] = set()
    for chunk in chunks(ids):
        query = select(memories.c.id).where(memories.c.tenant == tenant, memories.c.id.in_(chunk))
        out.update(conn.execute(query).scalars())
    return out
