"""`NightshiftStore`: LangGraph's `BaseStore` over the nightshift memory store.

A LangGraph or deepagents agent keeps the store API it already uses and gets
nightshift's scopes, provenance, the write gate, supersession (history kept),
TTL and forgetting behind it. One adapter is bound to one `Scope` and one actor.

    from memory.langgraph import NightshiftStore
    store = NightshiftStore(open_store(url), Scope("acme", "ana", "triage"),
                            actor="agent:triage", provenance=Provenance(Source.OPERATOR))
    store.put(("users", "ana"), "prefs", {"theme": "dark"}, ttl=60)
    store.search(("users",), query="dark theme", filter={"theme": {"$ne": "light"}})

What each operation means here (the encoding is in `memory.langgraph.encoding`):

- **put** — one `Candidate` per item (kind ``fact``, the adapter's provenance,
  content = canonical JSON of the value), all puts of a batch in one
  `Store.apply` (one transaction, one receipt ``langgraph:<hex>``). An existing
  value is *superseded*: the old row stays, linked, visible in `Store.history`.
  A put the gate refuses or holds for review raises `PutRefused` naming the rule;
  the batch's other puts are applied. Writing the same value again changes no
  row (nightshift's same-value rule) but does reset its TTL; `updated_at` stays.
  ``index`` is accepted and ignored: the whole value is full-text indexed. A
  value comes back as parsed JSON (a tuple inside it comes back as a list).
- **delete** — retires the active row: status ``expired``, ``valid_to`` = now,
  version + 1, audited as ``langgraph.delete``. History is kept; it is not true
  erasure. Nightshift's purge erases expired rows later (with the versions they
  superseded), and `memory.forgetting.forget` (person or operator) at once.
- **get / search / list_namespaces** — read only the bound scope (never the
  layers above, never another user's), only active rows not past ``valid_to``
  nor past nightshift's TTL (LangGraph's ``omit_expired`` is always on). `search` without a query is
  newest first (``updated_at`` descending, like PostgresStore); with a query it is
  ranked by nightshift's full text (PostgreSQL ``ts_rank``, SQLite FTS5 bm25;
  higher is better, the scale differs by dialect) and returns matching items only,
  with `SearchItem.score` set. LangGraph's own PostgresStore silently ignores
  `query` unless an embedding index is configured; this adapter never does. A
  query with no searchable word (``"the"``) is treated as no query. The indexed
  text is the canonical JSON, so field names count as words too.
- **TTL** — minutes, stored as ``valid_to``; a read with ``refresh_ttl`` moves it
  to now + TTL. ``TTLConfig`` ``default_ttl`` and ``refresh_on_read`` apply;
  ``sweep_interval_minutes`` is not used: nightshift's ``expire`` maintenance task
  marks such rows expired and its purge erases them. Nightshift's own retention
  (unreinforced memories expire after their TTL, 90 days by default; the
  `Store`'s ``ttl``) applies to adapter items as to any memory, on reads at once.

Refused before anything is read or written (the whole batch): a negative ``limit`` or
``offset``, a ``max_depth`` under 1, a ``filter`` that is not a mapping, a ``ttl`` that
is not positive finite minutes up to a century, a key or label with a lone surrogate,
and a value nested too deeply for JSON. PostgresStore raises for most of these too,
but from whichever layer trips first.

Bounds. Filters are evaluated in Python over the newest `scan_limit` active rows
of the scope (the port has no JSON or key-prefix push-down yet). Because the scan
is already in the result order, a page that fills from it is exact; when it does
not fill and the scan was cut off, `ScanBoundExceeded` is raised rather than a
silently short answer (always for `list_namespaces`, which needs every row).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)
from sqlalchemy import Engine

from memory import fulltext
from memory import port as memory_port
from memory.expiry import TtlConfig, is_expired
from memory.langgraph import encoding, matching
from memory.langgraph.encoding import ItemPath, validate_key, validate_put_namespace, validate_ttl
from memory.langgraph.errors import PutRefused, Refusal, ScanBoundExceeded
from memory.langgraph.rows import ItemRows
from memory.policy import AgentRules
from memory.port import RulesFor
from memory.receipts import Outcome
from memory.records import Candidate, Kind, Memory, Provenance, Scope, Status
from memory.store import Store

log = logging.getLogger(__name__)

DEFAULT_SCAN_LIMIT = 10_000


def _default_rules(agent: str) -> AgentRules:
    return AgentRules.default()


class NightshiftStore(BaseStore):
    """LangGraph's store API over nightshift memory, bound to one scope and actor.

    Args:
        store: a SQL-backed `memory.store.Store` (its clock is the adapter's clock).
        scope: where items are written and the only scope they are read from.
        actor: who the audit trail and receipts name for the adapter's writes.
        provenance: the provenance every put carries; its ``source`` (``operator``,
            ``stated``, ``inferred``…) decides how the gate treats the write. Its
            ``reference`` is replaced by the item's path.
        rules_for: the agent's attachment for the gate (default `AgentRules.default`).
        ttl: LangGraph's `TTLConfig` (``default_ttl`` minutes, ``refresh_on_read``).
        scan_limit: the most rows a search or listing reads (see module docstring).
    """

    supports_ttl = True

    def __init__(
        self,
        store: Store,
        scope: Scope,
        *,
        actor: str,
        provenance: Provenance,
        rules_for: RulesFor = _default_rules,
        ttl: TTLConfig | None = None,
        scan_limit: int = DEFAULT_SCAN_LIMIT,
    ) -> None:
        if store.engine is None:
            raise TypeError(
                "NightshiftStore needs a SQL-backed Store (Store(engine) or open_store(url)): "
                "TTL refresh and delete update rows, which the in-memory backend's port "
                "does not offer yet"
            )
        if not actor:
            raise ValueError("NightshiftStore needs an actor for the audit trail")
        if scan_limit < 1:
            raise ValueError(f"scan_limit must be positive, got {scan_limit}")
        self.store = store
        self.engine: Engine = store.engine
        self.scope = scope
        self.actor = actor
        self.provenance = provenance
        self.rules_for = rules_for
        self.ttl_config = ttl
        self.scan_limit = scan_limit
        self.rows = ItemRows(store.engine, scope, actor, store.ttl)

    # -- the port LangGraph builds everything on ------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Perform `ops`: reads see the store as it was before the batch's writes.

        As in InMemoryStore, every get, search and listing is answered first,
        then the puts (the last put per namespace and key wins) are applied.
        """
        ops = list(ops)
        results: list[Result] = [None] * len(ops)
        reads: list[tuple[int, GetOp | SearchOp | ListNamespacesOp]] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for index, op in enumerate(ops):
            if isinstance(op, PutOp):
                validate_put_namespace(op.namespace)
                validate_key(op.namespace, op.key)
                validate_ttl(op.namespace, op.key, op.ttl)
                puts[(op.namespace, op.key)] = op
            elif isinstance(op, GetOp | SearchOp | ListNamespacesOp):
                if isinstance(op, GetOp):
                    validate_key(op.namespace, op.key)
                elif isinstance(op, SearchOp):
                    matching.check_filter(op.filter)
                    matching.check_page(op.limit, op.offset)
                else:
                    matching.check_page(op.limit, op.offset, op.max_depth)
                reads.append((index, op))
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        now = self.store.clock()
        if reads:
            self._read(reads, results, now)
        if puts:
            self._write(list(puts.values()), now)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """`batch` in a worker thread: the SQL path is synchronous (SQLAlchemy Core)."""
        return await asyncio.to_thread(self.batch, list(ops))

    # -- reads -----------------------------------------------------------------

    def _read(
        self,
        reads: Sequence[tuple[int, GetOp | SearchOp | ListNamespacesOp]],
        results: list[Result],
        now: datetime,
    ) -> None:
        mine = (self.scope,)
        port_ops: list[memory_port.Op] = []
        for _, op in reads:
            if isinstance(op, GetOp):
                port_ops.append(
                    memory_port.HistoryOp(mine, encoding.memory_key(op.namespace, op.key))
                )
            elif isinstance(op, SearchOp) and _words(op):
                port_ops.append(
                    memory_port.SearchOp(
                        mine, _words(op), now, 0.0, self.scan_limit, self.store.ttl
                    )
                )
        needs_scan = any(
            isinstance(op, ListNamespacesOp) or (isinstance(op, SearchOp) and not _words(op))
            for _, op in reads
        )
        if needs_scan:  # the newest active rows of the scope, shared by the batch's reads
            port_ops.append(memory_port.ListOp(mine, (Status.ACTIVE,), self.scan_limit))
        answers = self.store.backend.batch(port_ops)
        scan: list[Memory] = answers.pop() if needs_scan else []
        scanned: list[tuple[Memory, float | None]] = [(m, None) for m in scan]
        refresh: dict[str, datetime] = {}
        pages: list[tuple[int, bool, list[tuple[Memory, ItemPath, float | None]]]] = []
        pending = iter(answers)
        for index, op in reads:
            if isinstance(op, GetOp):
                results[index] = self._get(next(pending), now, op.refresh_ttl, refresh)
            elif isinstance(op, SearchOp):
                rows = next(pending) if _words(op) else scanned
                pages.append((index, op.refresh_ttl, self._page(op, rows, now)))
            else:
                results[index] = self._namespaces(op, scan, now)
        self._fill_pages(pages, results, now, refresh)
        self.rows.set_valid_to({i: {"valid_to": t} for i, t in refresh.items()})

    def _get(
        self, history: list[Memory], now: datetime, refresh_ttl: bool, refresh: dict[str, datetime]
    ) -> Item | None:
        current = _current(history, now, self.store.ttl)
        if current is None:
            return None
        memory, path = current
        self._note_refresh(memory, path, now, refresh_ttl, refresh)
        value = encoding.decode_value(memory.content)
        return Item(
            value=value,
            key=path.key,
            namespace=path.namespace,
            created_at=_created_at(history, memory),
            updated_at=memory.valid_from,
        )

    def _page(
        self, op: SearchOp, rows: Sequence[tuple[Memory, float | None]], now: datetime
    ) -> list[tuple[Memory, ItemPath, float | None]]:
        matched = []
        for memory, score in rows:
            path = _item_path(memory, now, self.store.ttl)
            if path is None or not matching.in_prefix(path.namespace, op.namespace_prefix):
                continue
            if matching.matches_filter(encoding.decode_value(memory.content), op.filter):
                matched.append((memory, path, score))
        wanted = op.offset + op.limit
        if len(rows) >= self.scan_limit and len(matched) < wanted:
            raise ScanBoundExceeded(
                f"search of {op.namespace_prefix} in scope {self.scope} read the first "
                f"{self.scan_limit} memories in result order and found {len(matched)} of the "
                f"{wanted} items it needs; narrow the filter or raise scan_limit"
            )
        return matched[op.offset : op.offset + op.limit]

    def _fill_pages(
        self,
        pages: Sequence[tuple[int, bool, list[tuple[Memory, ItemPath, float | None]]]],
        results: list[Result],
        now: datetime,
        refresh: dict[str, datetime],
    ) -> None:
        keys = sorted({m.key for _, _, page in pages for m, _, _ in page})
        histories = dict(
            zip(
                keys,
                self.store.backend.batch(
                    [memory_port.HistoryOp((self.scope,), key) for key in keys]
                )
                if keys
                else [],
                strict=True,
            )
        )
        for index, refresh_ttl, page in pages:
            items = []
            for memory, path, score in page:
                self._note_refresh(memory, path, now, refresh_ttl, refresh)
                items.append(
                    SearchItem(
                        namespace=path.namespace,
                        key=path.key,
                        value=encoding.decode_value(memory.content),
                        created_at=_created_at(histories[memory.key], memory),
                        updated_at=memory.valid_from,
                        score=score,
                    )
                )
            results[index] = items

    def _namespaces(
        self, op: ListNamespacesOp, scan: Sequence[Memory], now: datetime
    ) -> list[tuple[str, ...]]:
        if len(scan) >= self.scan_limit:
            raise ScanBoundExceeded(
                f"list_namespaces in scope {self.scope} needs every item but the scan "
                f"stopped at scan_limit={self.scan_limit}; raise scan_limit"
            )
        live = (_item_path(m, now, self.store.ttl) for m in scan)
        found = {p.namespace for p in live if p is not None}
        conditions = [(c.match_type, c.path) for c in op.match_conditions or ()]
        return matching.list_namespaces(
            found, conditions, max_depth=op.max_depth, limit=op.limit, offset=op.offset
        )

    def _note_refresh(
        self,
        memory: Memory,
        path: ItemPath,
        now: datetime,
        refresh_ttl: bool,
        refresh: dict[str, datetime],
    ) -> None:
        if refresh_ttl and path.ttl is not None:
            refresh[memory.id] = now + timedelta(minutes=path.ttl)

    # -- writes ----------------------------------------------------------------

    def _write(self, puts: Sequence[PutOp], now: datetime) -> None:
        stores = [op for op in puts if op.value is not None]
        deletes = [op for op in puts if op.value is None]
        refusals: list[Refusal] = []
        handle = f"langgraph:{uuid.uuid4().hex}"
        if stores:
            candidates = [self._candidate(op, now) for op in stores]
            self.rows.expire_lapsed((c.key for c in candidates), now)
            receipt = self.store.apply(
                candidates, handle=handle, actor=self.actor, rules_for=self.rules_for
            )
            same_value: dict[str, Candidate] = {}
            for op, candidate, decision in zip(stores, candidates, receipt.decisions, strict=True):
                if decision.outcome in (Outcome.REFUSED, Outcome.REVIEW):
                    refusals.append(
                        Refusal(
                            op.namespace,
                            op.key,
                            decision.outcome.value,
                            str(decision.rule),
                            decision.reason,
                        )
                    )
                elif decision.outcome is Outcome.DUPLICATE and decision.memory_id:
                    same_value[decision.memory_id] = candidate
            # A put of the value already stored adds no row; its new TTL still applies.
            self.rows.set_valid_to(
                {
                    memory_id: {"valid_to": c.valid_to, "reference": c.provenance.reference}
                    for memory_id, c in same_value.items()
                }
            )
        if deletes:
            self.rows.retire((encoding.memory_key(op.namespace, op.key) for op in deletes), now)
        if refusals:
            log.warning(
                "langgraph put not stored",
                extra={
                    "action": "langgraph.put.refused",
                    "scope": str(self.scope),
                    "handle": handle,
                    "rules": [r.rule for r in refusals],
                },
            )
            raise PutRefused(self.scope, handle, refusals)

    def _candidate(self, op: PutOp, now: datetime) -> Candidate:
        assert op.value is not None
        ttl = float(op.ttl) if op.ttl is not None else None
        path = ItemPath(op.namespace, op.key, ttl)
        return Candidate(
            scope=self.scope,
            kind=Kind.FACT,
            content=encoding.encode_value(op.namespace, op.key, op.value),
            provenance=dataclasses.replace(self.provenance, reference=encoding.reference(path)),
            key=encoding.memory_key(op.namespace, op.key),
            idempotency_key=f"langgraph:{uuid.uuid4().hex}",
            valid_to=now + timedelta(minutes=ttl) if ttl is not None else None,
        )


def _words(op: SearchOp) -> tuple[str, ...]:
    return tuple(fulltext.terms(op.query)) if op.query else ()


def _item_path(memory: Memory, now: datetime, ttl: TtlConfig) -> ItemPath | None:
    """The item a row holds, if it is a live adapter item (active, not expired)."""
    if memory.status is not Status.ACTIVE or not encoding.is_item_key(memory.key):
        return None
    if is_expired(memory, now, ttl):
        return None
    return encoding.parse_reference(memory.reference)


def _current(
    history: Sequence[Memory], now: datetime, ttl: TtlConfig
) -> tuple[Memory, ItemPath] | None:
    live = [(m, p) for m in history if (p := _item_path(m, now, ttl)) is not None]
    return max(live, key=lambda pair: pair[0].valid_from) if live else None


def _created_at(history: Sequence[Memory], current: Memory) -> datetime:
    """When the item was first put: the oldest row of its unbroken supersession chain."""
    by_id = {m.id: m for m in history}
    first, seen = current, {current.id}
    while (earlier := by_id.get(first.supersedes_id or "")) is not None:
        if earlier.id in seen:
            break
        seen.add(earlier.id)
        first = earlier
    return first.valid_from


__all__ = ["NightshiftStore"]
