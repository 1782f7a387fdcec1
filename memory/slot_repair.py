"""Slots that hold several active values, settled as the writer would have settled them.

Before keys were matched folded (revision 0013), "diet" and "Diet" were two slots:
a person's statement and an agent's inference could both be active on what reads
as one key, and a correction spelled differently stood beside what it corrected.
Migration 0013 settles every such slot; an import of an export made before it
settles the slots its rows crowd.

Settling replays a slot's active rows in the order they were written (`valid_from`,
then `created_at`, then id) through the writer's rules (`memory.writing`):

- the first is the slot's value;
- a later row from a trusted source (the person, the operator), or any later row
  while the value is an agent's, supersedes it: the old row becomes `superseded`
  at the successor's `valid_from` (`superseded_at`, `valid_to`), linked both ways
  (`superseded_by_id`; the successor's `supersedes_id` unless it already names
  its own predecessor);
- a later row from another source while the value is the person's or the
  operator's waits for review (`pending_review`): a statement beats an inference,
  whichever is newer, until the person (or the operator approving it) says so.

So the newest trusted value stays active, newer inferences go to the review queue
rather than being lost, and nothing is deleted. Every change is audited (actor and
`rule` `same-folded-key`), with ids only, never content. The display key of every
row stays as written.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection

from memory.tables import Timestamp, memories

TRUSTED = frozenset({"stated", "operator"})
RULE = "same-folded-key"
Slot = tuple[str, str, str, str]
"""(tenant, user_id, agent_id, key_folded)."""

_rows = sa.table(
    "ns_memories",
    *(sa.column(name) for name in ("id", "tenant", "user_id", "agent_id", "key", "key_folded")),
    *(sa.column(name) for name in ("status", "source", "idempotency_key", "version")),
    *(sa.column(name) for name in ("supersedes_id", "superseded_by_id")),
    *(sa.column(name, Timestamp()) for name in ("valid_from", "created_at")),
    *(sa.column(name, Timestamp()) for name in ("superseded_at", "valid_to")),
)
"""The columns settling reads and writes, named here rather than taken from
`memory.tables`, so that migration 0013 keeps running as the table grows."""
_audit = sa.table(
    "ns_audit",
    sa.column("at", Timestamp()),
    *(sa.column(name) for name in ("actor", "action", "memory_id", "tenant", "detail")),
)
_SLOT = (_rows.c.tenant, _rows.c.user_id, _rows.c.agent_id, _rows.c.key_folded)
_ACTIVE_KEYED = sa.and_(_rows.c.status == "active", _rows.c.key != "")


def settle(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The changes, by row id, that leave one active value among `rows` (one slot's
    active rows, as column mappings); rows left as they are have no entry."""
    changes: dict[str, dict[str, Any]] = {}
    current: Mapping[str, Any] | None = None
    for row in sorted(rows, key=lambda r: (r["valid_from"], r["created_at"], r["id"])):
        if current is None:
            current = row
        elif current["source"] in TRUSTED and row["source"] not in TRUSTED:
            changes[row["id"]] = {"status": "pending_review", "version": row["version"] + 1}
        else:
            changes[current["id"]] = {
                "status": "superseded",
                "superseded_by_id": row["id"],
                "superseded_at": row["valid_from"],
                "valid_to": row["valid_from"],
                "version": current["version"] + 1,
            }
            if row["supersedes_id"] is None:
                changes[row["id"]] = {"supersedes_id": current["id"]}
            current = row
    return changes


def crowded(conn: Connection) -> list[Slot]:
    """Every slot holding more than one active value."""
    query = (
        sa.select(*_SLOT)
        .where(_ACTIVE_KEYED)
        .group_by(*_SLOT)
        .having(sa.func.count() > 1)
        .order_by(*_SLOT)
    )
    return [(r[0], r[1], r[2], r[3]) for r in conn.execute(query)]


def repair(
    conn: Connection,
    slots: Iterable[Slot],
    *,
    actor: str,
    now: datetime,
    arriving: Sequence[Mapping[str, Any]] = (),
) -> int:
    """Settle `slots`, counting `arriving` rows (an import's, turned away by the one
    active value per slot) among their slots' active rows, then insert those settled.
    Returns how many rows changed status."""
    by_slot: dict[Slot, list[Mapping[str, Any]]] = {slot: [] for slot in slots}
    for row in arriving:
        by_slot.setdefault(_slot_of(row), []).append(row)
    new = {row["id"]: row for row in arriving}
    moved = 0
    entries: list[dict[str, Any]] = []
    for slot, rows in by_slot.items():
        stored = [dict(r) for r in conn.execute(sa.select(_rows).where(*_in(slot))).mappings()]
        changes = settle([*stored, *rows])
        for memory_id, change in changes.items():
            if memory_id not in new:
                conn.execute(sa.update(_rows).where(_rows.c.id == memory_id).values(change))
            moved += "status" in change
            entries += _audited(slot[0], memory_id, change, actor, now)
        for row in rows:
            conn.execute(sa.insert(memories).values({**row, **changes.get(row["id"], {})}))
    if entries:
        conn.execute(sa.insert(_audit), entries)
    return moved


def _in(slot: Slot) -> list[Any]:
    return [*(column == value for column, value in zip(_SLOT, slot, strict=True)), _ACTIVE_KEYED]


def _slot_of(row: Mapping[str, Any]) -> Slot:
    return (row["tenant"], row["user_id"], row["agent_id"], row["key_folded"])


def _audited(
    tenant: str, memory_id: str, change: Mapping[str, Any], actor: str, now: datetime
) -> list[dict[str, Any]]:
    status = change.get("status")
    if status == "superseded":
        action, detail = "supersede", {"superseded_by": change["superseded_by_id"]}
    elif status == "pending_review":
        action, detail = "review.queued", {"because": "stated-beats-inferred"}
    else:
        return []  # a successor's back link: audited with the row it supersedes
    detail["rule"] = RULE
    row = {"at": now, "actor": actor, "action": action, "memory_id": memory_id, "tenant": tenant}
    return [{**row, "detail": json.dumps(detail)}]
