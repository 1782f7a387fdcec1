"""What schema comparison leaves out: the full-text structures `memory.fulltext` makes."""

from __future__ import annotations

from typing import Any

from memory.fulltext import FULLTEXT_TABLES


def include_object(
    obj: Any, name: str | None, type_: str, reflected: bool, compare_to: Any
) -> bool:
    if type_ == "table" and name in FULLTEXT_TABLES:
        return False
    # The PostgreSQL GIN expression index is made by memory.fulltext too.
    return not (type_ == "index" and name == "ix_ns_memories_fts")
