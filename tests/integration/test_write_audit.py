"""An apply's audit trail, stored by the SQL backends as one row per tenant it wrote and
read back with its receipt (`memory.write_audit`), is the trail the in-memory backend
keeps entry by entry; a memory's entries are found by its id, rows stored one per
candidate (before revision 0020) are read as they are, and a forget marks the rows
that name what it deleted."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import insert, select

from memory import write_audit
from memory.forgetting import Requester, Selector, forget
from memory.port import AuditEntry
from memory.receipts import WriteReceipt
from memory.records import Candidate, Kind, Provenance, Scope, Source
from memory.store import Store
from memory.tables import audit
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


def _applied(store: Store) -> list[WriteReceipt]:
    receipts = [
        store.apply(batch, handle=f'h{n} "quoted" \\ ☃', actor="writer@test")
        for n, batch in enumerate(_batches())
    ]
    outcomes = [d.outcome.value for d in receipts[1].decisions]
    assert outcomes == ["superseded", "stored", "duplicate", "refused", "review", "stored"]
    return receipts


def test_the_stored_trail_reads_as_the_trail_kept_entry_by_entry(
    store: Store, clock: Clock
) -> None:
    stored = _trail(store, _applied(store))
    in_memory = Store.in_memory(clock=clock)
    assert len(stored) == 8
    assert stored == _trail(in_memory, _applied(in_memory))
    with store.engine.connect() as conn:
        rows = conn.execute(select(audit.c.tenant, audit.c.action, audit.c.detail)).all()
    # One row per apply and tenant: the first apply's, then the second's for each tenant.
    assert [(t, a) for t, a, _ in rows] == [("acme", "write")] * 2 + [("globex", "write")]
    assert "globex" not in rows[1].detail and "acme/" not in rows[2].detail  # tenants apart
    assert json.loads(rows[2].detail)["counts"] == {"refused": 1, "stored": 1}


def test_a_memory_s_trail_is_found_by_its_id(store: Store) -> None:
    receipts = _applied(store)
    vegetarian = receipts[0].decisions[0].memory_id
    vegan = receipts[1].decisions[0].memory_id
    assert vegetarian and vegan
    trail = [(e.action, e.detail["index"]) for e in store.audit("acme", vegetarian)]
    assert trail == [("write.stored", 0)]  # its supersession is its successor's entry
    trail = [(e.action, e.detail["superseded"]) for e in store.audit("acme", vegan)]
    assert trail == [("write.superseded", vegetarian)]
    assert store.audit("globex", vegan) == []  # another tenant's trail names nothing of it
    assert len(store.audit("acme", limit=2)) == 2


def test_an_entry_stored_one_per_candidate_is_read_as_it_is(store: Store) -> None:
    (receipt,) = [_applied(store)[0]]
    memory_id = receipt.decisions[1].memory_id
    old = {"handle": "before-0020", "index": 0, "rule": "ok", "kind": "fact"}
    with store.engine.begin() as conn:
        conn.execute(
            insert(audit).values(
                at=receipt.created_at,
                actor="writer@old",
                tenant="acme",
                action="write.stored",
                memory_id=memory_id,
                detail=json.dumps(old),
            )
        )
    trail = store.audit("acme", memory_id)
    assert [(e.actor, e.action, e.detail) for e in trail][-1] == ("writer@old", "write.stored", old)
    # stored by the first apply, a duplicate in the second, then the row stored before
    assert [e.action for e in trail] == ["write.stored", "write.duplicate", "write.stored"]


def test_a_forget_marks_the_rows_that_name_what_it_deleted(store: Store) -> None:
    receipts = _applied(store)
    bob = receipts[1].decisions[1].memory_id
    report = forget(
        store.engine, Selector.by_scope(BOB), Requester.operator("ops@test"), now=store.clock()
    )
    assert report.deleted == 1 and report.places["audit"] == 0 and bob
    with store.engine.connect() as conn:
        marked = conn.execute(select(audit.c.detail).where(audit.c.redacted)).scalars().all()
    assert [json.loads(d)["handle"] for d in marked] == [receipts[1].handle]


def test_outcome_counts_add_up_every_candidate_of_every_row(store: Store) -> None:
    receipts = _applied(store)
    with store.engine.begin() as conn:  # an entry stored one per candidate (before 0020)
        conn.execute(
            insert(audit).values(
                at=receipts[0].created_at,
                actor="writer@old",
                tenant="acme",
                action="write.refused",
                memory_id=None,
                detail="{}",
            )
        )
        counts = write_audit.outcome_counts(conn)
    expected: dict[str, int] = {"refused": 1}
    for receipt in receipts:
        for outcome, count in receipt.counts().items():
            expected[outcome] = expected.get(outcome, 0) + count
    assert (
        counts
        == expected
        == {
            "stored": 4,
            "superseded": 1,
            "duplicate": 1,
            "refused": 2,
            "review": 1,
        }
    )
