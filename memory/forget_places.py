"""Places outside memory's own tables that may repeat a memory's text.

A run's summary, payload or error can quote what the agent was given, so a
forgotten memory's text can outlive the memory there. `memory/` does not know
those tables (it imports nothing from the packages built on it); the caller that
does — the composition root — names them as `TextPlace`s, and `forget` scrubs
each forgotten text out of them in the same transaction as the delete, then
re-lists them in its verification like every other place.

    RUN_TEXT = TextPlace("runs", runs_table, key="key", tenant="tenant",
                         columns=("summary", "payload", "error"))
    forget(engine, selector, requester, now=now, places=(RUN_TEXT,))
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, Table, func, or_, select, update

REDACTED = "[forgotten]"
_TEXTS_PER_QUERY = 50


@dataclass(frozen=True, slots=True)
class TextPlace:
    """A table whose text `columns` may quote memory; rows belong to a `tenant` column."""

    name: str
    table: Table
    key: str
    tenant: str
    columns: tuple[str, ...]

    def holding(self, texts: Sequence[str]) -> ColumnElement[bool]:
        """Rows where any column holds any of `texts` (`holding`)."""
        return holding([self.table.c[column] for column in self.columns], texts)


def spellings(text: str) -> tuple[str, ...]:
    """How `text` can stand in a column: as it is, and inside a JSON string, escaped to
    ASCII (`json.dumps`'s default: "Żubrówka" is `\\u017bubr\\u00f3wka`; how run
    payloads, audit details and receipts were written) or not (quotes, backslashes
    and control characters escaped all the same)."""
    inside = json.dumps(text)[1:-1], json.dumps(text, ensure_ascii=False)[1:-1]
    return tuple(dict.fromkeys((text, *inside)))


def holding(columns: Sequence[Any], texts: Sequence[str]) -> ColumnElement[bool]:
    """Rows where any of `columns` contains any spelling of any of `texts`, ignoring
    case: what a scrub rewrites and what its re-count looks for."""
    return or_(
        *(
            func.lower(column).contains(spelling.lower(), autoescape=True)
            for column in columns
            for text in texts
            for spelling in spellings(text)
        )
    )


def scrub(conn: Connection, place: TextPlace, tenant: str, texts: Collection[str]) -> int:
    """Replace every occurrence of `texts`, in each of their `spellings`, in the
    tenant's rows of `place`; return the number of rows rewritten. Longer texts go
    first, so a text that contains another is removed whole. A JSON string stays
    one: `REDACTED` needs no escaping."""
    if not texts:
        return 0
    ordered = sorted(texts, key=len, reverse=True)
    every = sorted({s for text in ordered for s in spellings(text)}, key=len, reverse=True)
    pattern = re.compile("|".join(re.escape(s) for s in every), re.IGNORECASE)
    table = place.table
    changed: set[Any] = set()
    for batch in _batches(ordered):
        query = select(table.c[place.key], *(table.c[c] for c in place.columns)).where(
            table.c[place.tenant] == tenant, place.holding(batch)
        )
        for row in conn.execute(query).all():
            values: dict[str, Any] = {
                column: pattern.sub(REDACTED, row[i + 1])
                for i, column in enumerate(place.columns)
                if row[i + 1]
            }
            conn.execute(update(table).where(table.c[place.key] == row[0]).values(**values))
            changed.add(row[0])
    return len(changed)


def count_holding(conn: Connection, place: TextPlace, tenant: str, text: str) -> int:
    """Rows of the tenant in `place` that still contain `text` (for the re-listing)."""
    table = place.table
    query = (
        select(func.count())
        .select_from(table)
        .where(table.c[place.tenant] == tenant, place.holding([text]))
    )
    return int(conn.execute(query).scalar_one())


def _batches(texts: Sequence[str]) -> Iterable[list[str]]:
    for start in range(0, len(texts), _TEXTS_PER_QUERY):
        yield list(texts[start : start + _TEXTS_PER_QUERY])
