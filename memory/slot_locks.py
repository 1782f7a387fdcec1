"""Turns at a contested slot: writers that keep losing a slot to each other queue.

The unique active value per slot (`uq_ns_memories_active_slot`) settles a race by
failing the loser, which `memory.sql` applies again from a fresh read. Under steady
contention (several LangGraph processes putting one key) the same writer could lose
every round and raise the unique violation to its caller. So a replay, on PostgreSQL,
first takes its turn at the slots it writes:

- a transaction-level advisory lock per slot, in one sorted order (no deadlock among
  replays): replaying writers of a slot go one at a time;
- then a row lock (`FOR UPDATE`) on each slot's active value: a first attempt, which
  takes no advisory lock, must update that row to supersede it, so it waits for the
  replay to commit and then loses to it (its version check fails) instead of beating
  it between its read and its write.

First attempts take neither: the uncontested write, the writer's common case, costs
nothing more. SQLite needs none: `BEGIN IMMEDIATE` already serialises writers from
read to commit.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from sqlalchemy import Connection, and_, or_, select, text

from memory.folding import folded_key
from memory.port import ApplyOp, Op
from memory.records import Scope
from memory.tables import ACTIVE_ROW, KEYED_ROW, memories


def slots_of(ops: Sequence[Op]) -> list[tuple[Scope, str]]:
    """The keyed slots (scope, folded key) the applies in `ops` write, in a fixed order."""
    slots = {
        (c.scope, folded_key(c.key))
        for op in ops
        if isinstance(op, ApplyOp)
        for c in op.candidates
        if c.key
    }
    return sorted(slots, key=lambda slot: (str(slot[0]), slot[1]))


def slot_lock_id(scope: Scope, key_folded: str) -> int:
    """A signed 64-bit advisory lock id for a slot. Two slots may share one (a hash):
    they then take turns needlessly, never wrongly."""
    slot = "\x1f".join((scope.tenant, scope.user, scope.agent, key_folded))
    digest = hashlib.blake2b(slot.encode("utf-8", "surrogatepass"), digest_size=8)
    return int.from_bytes(digest.digest(), "big", signed=True)


def take_slot_turns(conn: Connection, ops: Sequence[Op]) -> None:
    """Wait for this transaction's turn at every slot `ops` write (PostgreSQL only)."""
    slots = slots_of(ops)
    if not slots or conn.dialect.name != "postgresql":
        return
    conn.execute(
        text("SELECT pg_advisory_xact_lock(id) FROM unnest(CAST(:ids AS bigint[])) AS id"),
        {"ids": sorted({slot_lock_id(scope, key) for scope, key in slots})},
    )
    c = memories.c
    holding = or_(
        *(
            and_(
                c.tenant == scope.tenant,
                c.user_id == scope.user,
                c.agent_id == scope.agent,
                c.key_folded == key,
            )
            for scope, key in slots
        )
    )
    conn.execute(
        select(c.id).where(holding, ACTIVE_ROW, KEYED_ROW).order_by(c.id).with_for_update()
    )
