"""An apply's audit entries, which PostgreSQL's write statement builds from the receipt it
inserts (`memory.pending`), are the entries the other backends record in Python
(`memory.port.ReceiptAudit.entries`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

from memory.port import AuditEntry
from memory.receipts import WriteReceipt
from memory.records import Candidate, Kind, Provenance, Scope, Source
from memory.store import Store
from tests.clock import Clock

ANA = Scope("acme", "ana", "triage")
BOB = Scope("acme", 'bo\\b "the builder" ünï')  # what JSON must escape, and more
OTHER = Scope("globex", "ana", "triage")


def _batches() -> list[list[Candidate]]:
    def fact(scope: Scope, content: str, source: Source, key: str = "") -> Candidate:
        provenance = Provenance(source, reference="msg#1")
        return Candidate(scope, Kind.FACT, content, provenance, key=key, idempotency_key=content)

    return [
        [  # one scope, one source: the values the statement shares across the batch
            fact(ANA, "Ana is vegetarian", Source.STATED, key="diet"),
            fact(ANA, "Ana moved to Lisbon", Source.STATED),
        ],
        [  # scopes, tenants and sources differ by candidate; a supersession, a
            # duplicate, a refusal (no memory id) and a review
            fact(ANA, "Ana is vegan", Source.STATED, key="diet"),
            fact(BOB, "Bob likes tea", Source.OBSERVED),
            fact(ANA, "Ana moved to Lisbon", Source.STATED),
            fact(OTHER, "password=hunter2hunter2", Source.OBSERVED),
            fact(ANA, "Ana eats fish", Source.INFERRED, key="diet"),
            fact(OTHER, "Globex renews in May", Source.OPERATOR),
        ],
        [],  # a batch of nothing: a receipt and no entry
    ]


def _trail(store: Store, receipts: list[WriteReceipt]) -> list[tuple[Any, ...]]:
    """The trail of every tenant, memory ids named by (receipt, index) instead of by id."""
    names: dict[str | None, str | None] = {None: None}
    for n, receipt in enumerate(receipts):
        for d in receipt.decisions:
            names.setdefault(d.memory_id, f"{n}:{d.index}")

    def row(e: AuditEntry) -> tuple[Any, ...]:
        detail = {**e.detail, "superseded": names[e.detail["superseded"]]}
        return (e.at, e.actor, e.action, names[e.memory_id], e.tenant, detail)

    return [row(e) for tenant in ("acme", "globex") for e in store.audit(tenant)]


def test_postgres_records_the_entries_the_other_backends_record(
    pg_engine: Engine, clock: Clock
) -> None:
    stores = [Store(pg_engine, clock=clock), Store.in_memory(clock=clock)]
    trails = []
    for store in stores:
        receipts = [
            store.apply(batch, handle=f'h{n} "quoted" \\ ☃', actor="writer@test")
            for n, batch in enumerate(_batches())
        ]
        outcomes = [d.outcome.value for d in receipts[1].decisions]
        assert outcomes == ["superseded", "stored", "duplicate", "refused", "review", "stored"]
        trails.append(_trail(store, receipts))
    on_postgres, in_memory = trails
    assert len(on_postgres) == 8
    assert on_postgres == in_memory
