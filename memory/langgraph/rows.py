"""The row changes the adapter needs that the memory port does not offer yet.

`Store.apply` covers every put (gate, supersession, receipt, audit). Some changes
are not a new value and so not a candidate: moving an item's ``valid_to`` (TTL
refresh on read, and a put of the value already stored), expiring an item whose
TTL ran out before it is put again, and retiring an item on delete. They go through the named queries of `memory.queries` on the store's
engine, one transaction each call. When the port grows ``RefreshOp`` /
``RetireOp`` this module becomes two `backend.batch` calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from sqlalchemy import Engine, and_

from memory import expiry, queries
from memory.langgraph.errors import ConcurrentChange
from memory.port import AuditEntry
from memory.records import Scope, Status
from memory.tables import memories

RETIRE_ATTEMPTS = 3


class _Moved(Exception):
    """A row's version moved under a delete; the transaction rolls back and retries."""


class ItemRows:
    """Row changes for the items of one scope, written as one actor."""

    def __init__(
        self, engine: Engine, scope: Scope, actor: str, ttl: expiry.TtlConfig = expiry.DEFAULT_TTL
    ) -> None:
        self.engine = engine
        self.scope = scope
        self.actor = actor
        self.ttl = ttl

    def set_valid_to(self, changes: Mapping[str, Mapping[str, object]]) -> None:
        """Apply `{memory_id: {"valid_to": …, ["reference": …]}}` (no version bump:
        the content did not change, so an edit based on that version stays valid)."""
        if not changes:
            return
        with self.engine.begin() as conn:
            for memory_id, values in changes.items():
                queries.update_memory(conn, memory_id, values)

    def expire_lapsed(self, keys: Iterable[str], now: datetime) -> None:
        """Mark active rows of `keys` whose TTL ran out `expired`, before a put.

        The same change the ``expire`` maintenance task makes (the item's TTL, or
        nightshift's TTL since the last reinforcement), made early so a put after
        expiry starts a new item instead of superseding (or, with the same value,
        reviving) the lapsed one.
        """
        keys = list(keys)
        if not keys:
            return
        # Item keys are their own folded form (`folding.ITEM_KEY_PREFIXES`): the slot index.
        among = and_(queries.in_scope(self.scope), memories.c.key_folded.in_(keys))
        with self.engine.begin() as conn:
            expiry.expire(conn, now, self.ttl, tenant=self.scope.tenant, among=among)

    def retire(self, keys: Iterable[str], now: datetime) -> None:
        """Mark the active row of each key `expired` at `now`, version + 1, audited."""
        keys = list(keys)
        for _ in range(RETIRE_ATTEMPTS):
            try:
                self._retire_once(keys, now)
            except _Moved:
                continue
            return
        raise ConcurrentChange(
            f"delete in scope {self.scope}: the items kept changing while being deleted"
        )

    def _retire_once(self, keys: list[str], now: datetime) -> None:
        with self.engine.begin() as conn:
            entries = []
            for key in keys:
                history = queries.history(conn, (self.scope,), key)
                for memory in (m for m in history if m.status is Status.ACTIVE):
                    changes = {
                        "status": Status.EXPIRED,
                        "valid_to": now,
                        "version": memory.version + 1,
                    }
                    if not queries.update_memory(
                        conn, memory.id, changes, expected_version=memory.version
                    ):
                        raise _Moved(memory.id)
                    entries.append(
                        AuditEntry(
                            now,
                            self.actor,
                            "langgraph.delete",
                            memory.id,
                            self.scope.tenant,
                            {"scope": str(self.scope), "from_version": memory.version},
                        )
                    )
            queries.record_audit(conn, entries)
