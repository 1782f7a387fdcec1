"""The audit trail of an apply: one entry per candidate to read, one row per tenant to store.

Every candidate an apply judges has its entry in the audit trail — who, when, what
became of it (``write.stored``, ``write.superseded``, ``write.refused``…), which
memory, by which rule, in which scope, from which source. Most of that is already
in the apply's receipt (`memory.receipts`), decision by decision. So the SQL
backends store an apply's trail as one audit row per tenant it wrote (action
``write``, `BATCH`): the receipt's handle, the scopes and sources of its
candidates, the ids of the memories its decisions name (which PostgreSQL indexes,
so a memory's trail is found by id) and the count of each outcome. A reader gets
the same entries back (`expand`, with the receipt): storing fifty rows for fifty
candidates was the dearest part of the writer's statement after the memories
themselves.

The in-memory backend keeps the entries themselves (`WriteAudit.entries`); rows
written one per candidate by earlier versions are read as they are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Integer,
    and_,
    cast,
    exists,
    false,
    func,
    literal_column,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import JSONB, array

from memory.dialect import on_postgres
from memory.port import AuditEntry
from memory.quick_init import quick_init
from memory.receipts import Decision, Outcome, WriteReceipt
from memory.records import Scope
from memory.tables import audit

WRITE_ACTIONS = {outcome: f"write.{outcome.value}" for outcome in Outcome}
"""The audit action of each outcome of an apply's candidate."""
BATCH = "write"
"""The action of the stored row that holds an apply's entries for one tenant."""

_IS_BATCH = audit.c.action == literal_column(f"'{BATCH}'")
_IDS = cast(audit.c.detail, JSONB).op("->")(literal_column("'ids'"))
"""The memory ids a `BATCH` row names, as PostgreSQL indexes them (`IDS_DDL`). Literals,
not parameters, so that a query's expression is the index's own."""
IDS_DDL = (
    "CREATE INDEX IF NOT EXISTS ix_ns_audit_write_ids ON ns_audit"
    f" USING gin (((detail::jsonb) -> 'ids')) WHERE action = '{BATCH}'",
)
"""Revision 0020_write_audit_rows: a memory's entries in the `BATCH` rows, found by id."""
IDS_DROP = ("DROP INDEX IF EXISTS ix_ns_audit_write_ids",)


def create(conn: Connection) -> None:
    on_postgres(conn, IDS_DDL)


def drop(conn: Connection) -> None:
    on_postgres(conn, IDS_DROP)


def naming(ids: Sequence[str], dialect: str) -> ColumnElement[bool]:
    """The `BATCH` rows that name one of the memories `ids` (PostgreSQL by the index;
    SQLite, which keeps no index of them, by reading each row's ids)."""
    if not ids:
        return false()
    if dialect == "postgresql":
        return and_(_IS_BATCH, _IDS.op("?|")(array(list(ids))))
    named = func.json_each(audit.c.detail, "$.ids").table_valued("value")
    return and_(_IS_BATCH, exists(select(named.c.value).where(named.c.value.in_(list(ids)))))


def outcome_counts(conn: Connection) -> dict[str, int]:
    """How many candidates had each outcome (``stored``, ``refused``…), over the whole
    trail: rows stored one per candidate before revision 0020 counted by action, the
    `BATCH` rows' counts summed in the database (nothing of their ids is read out)."""
    counts: dict[str, int] = {}
    one_each = (
        select(audit.c.action, func.count())
        .where(audit.c.action.like("write.%"))
        .group_by(audit.c.action)
    )
    for action, count in conn.execute(one_each):
        counts[action.removeprefix("write.")] = count
    if conn.dialect.name == "postgresql":
        each = func.jsonb_each_text(
            cast(audit.c.detail, JSONB).op("->")(literal_column("'counts'"))
        )
        held = each.table_valued("key", "value")
        summed = func.sum(cast(held.c.value, Integer))
    else:
        held = func.json_each(audit.c.detail, "$.counts").table_valued("key", "value")
        summed = func.sum(held.c.value)
    for outcome, count in conn.execute(
        select(held.c.key, summed)
        .select_from(audit.join(held, true()))
        .where(_IS_BATCH)
        .group_by(held.c.key)
    ):
        counts[outcome] = counts.get(outcome, 0) + int(count)
    return counts


@quick_init
@dataclass(frozen=True, slots=True)
class WriteAudit:
    """What an apply's audit entries say besides its receipt: who applied it, and each
    candidate's scope and source, in the receipt's order."""

    actor: str
    scopes: tuple[Scope, ...]
    sources: tuple[str, ...]

    def entries(self, receipt: WriteReceipt) -> list[AuditEntry]:
        """One entry per decision of `receipt`: the apply's audit trail as it is read."""
        texts = {scope: str(scope) for scope in self.scopes}
        return [
            _entry(receipt, self.actor, scope.tenant, d, texts[scope], source)
            for d, scope, source in zip(receipt.decisions, self.scopes, self.sources, strict=True)
        ]

    def rows(self, receipt: WriteReceipt) -> list[AuditEntry]:
        """The same trail as stored: one `BATCH` row per tenant (nearly always one),
        whose detail names nothing of another tenant's candidates."""
        by_tenant: dict[str, list[int]] = {}
        for index, scope in enumerate(self.scopes):
            by_tenant.setdefault(scope.tenant, []).append(index)
        rows = []
        for tenant, indexes in by_tenant.items():
            whole = len(indexes) == len(self.scopes)
            decisions = receipt.decisions if whole else [receipt.decisions[i] for i in indexes]
            scopes = self.scopes if whole else [self.scopes[i] for i in indexes]
            sources = self.sources if whole else [self.sources[i] for i in indexes]
            counts: dict[str, int] = {}
            for d in decisions:
                counts[d.outcome.value] = counts.get(d.outcome.value, 0) + 1
            detail: dict[str, Any] = {"handle": receipt.handle}
            if not whole:
                detail["indexes"] = indexes
            detail.update(_one_or_each("scope", scopes, str))
            detail.update(_one_or_each("source", sources, str))
            detail["ids"] = list(dict.fromkeys(d.memory_id for d in decisions if d.memory_id))
            detail["counts"] = counts
            rows.append(AuditEntry(receipt.created_at, self.actor, BATCH, None, tenant, detail))
        return rows


def expand(row: AuditEntry, receipt: WriteReceipt | None) -> list[AuditEntry]:
    """The entries a stored `BATCH` row holds, read with its apply's receipt; the row as it
    is when the receipt is not there (an export of the audit trail without receipts)."""
    if receipt is None:
        return [row]
    detail = row.detail
    indexes = detail.get("indexes", range(len(receipt.decisions)))
    scopes = _each(detail, "scope", len(indexes))
    sources = _each(detail, "source", len(indexes))
    return [
        _entry(receipt, row.actor, row.tenant, receipt.decisions[i], scope, source)
        for i, scope, source in zip(indexes, scopes, sources, strict=True)
    ]


def handles(rows: Iterable[AuditEntry]) -> list[str]:
    """The receipt handles whose decisions `expand` needs for `rows`."""
    return list(dict.fromkeys(r.detail["handle"] for r in rows if r.action == BATCH))


def _entry(
    receipt: WriteReceipt, actor: str, tenant: str, d: Decision, scope: str, source: str
) -> AuditEntry:
    return AuditEntry(
        receipt.created_at,
        actor,
        WRITE_ACTIONS[d.outcome],
        d.memory_id,
        tenant,
        {
            "handle": receipt.handle,
            "index": d.index,
            "rule": d.rule,
            "kind": d.kind,
            "scope": scope,
            "source": source,
            "superseded": d.superseded_id,
        },
    )


def _one_or_each(name: str, values: Sequence[Any], text: Any) -> dict[str, Any]:
    """`{name: value}` when every value is the first, else `{name + "s": [values]}`."""
    if values and values.count(values[0]) == len(values):
        return {name: text(values[0])}
    return {f"{name}s": [text(v) for v in values]}


def _each(detail: dict[str, Any], name: str, count: int) -> list[Any]:
    if f"{name}s" in detail:
        return list(detail[f"{name}s"])
    return [detail.get(name)] * count
