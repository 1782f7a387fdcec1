"""What schema comparison leaves out: the structures made by DDL of their own, not by
the models — the full-text ones (`memory.fulltext`) and the index of the writer's
audit rows (`memory.write_audit`)."""

from __future__ import annotations

from typing import Any

from memory.fulltext import FULLTEXT_TABLES


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    if type_ == "table" and name in FULLTEXT_TABLES:
        return False
    # PostgreSQL GIN expression indexes.
    return not (type_ == "index" and name in ("ix_ns_memories_fts", "ix_ns_audit_write_ids"))
