"""Every change to memory, written once for all backends: apply, edit, review.

- `apply` judges each candidate with the gate (`memory.policy.judge`), then applies
  idempotency (one row per idempotency key per scope), supersession (a new active
  value for a key replaces the old one, linked both ways, old row kept) and the
  rule that a person's statement is not superseded by an agent's value (the latter
  waits for review). One receipt per handle; a replayed handle returns it unchanged.
  Keys are matched folded (`folding.folded_key`): "diet" and "Diet " are one slot,
  so a spelling can neither slip an agent's value past the person's statement nor
  leave a correction beside what it corrects. Idempotency keys match exactly.
- `edit` is the operator's direct change, with optimistic concurrency: it names the
  version it read; a stale edit raises `EditConflict` unless forced, and a forced
  edit is audited as such. The row keeps its id and becomes the operator's word;
  what it said before is kept as a superseded row linked both ways, as a
  supersession keeps it.
- `review` approves or rejects a memory waiting for review.

Every change lands in the audit trail: who, what, when, why. Audit details never
hold memory content (forgetting must be able to remove content everywhere), only
ids, rules, versions and hashes.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memory.folding import folded_key, spelled
from memory.phrasing import is_blank
from memory.policy import (
    DEFAULT_CONFIG,
    Action,
    AgentRules,
    Verdict,
    effective_confidence,
    judge,
)
from memory.port import (
    ApplyOp,
    AuditEntry,
    EditConflict,
    EditOp,
    EditRefused,
    EditResult,
    HandleTaken,
    MemoryNotFound,
    NotPending,
    ReviewOp,
    ScopeRefused,
)
from memory.receipts import Decision, Outcome, WriteReceipt
from memory.records import (
    SOURCE_CONFIDENCE,
    Candidate,
    Kind,
    Memory,
    Scope,
    Source,
    Status,
    content_hash,
)
from memory.secrets import find_secrets_as_read
from memory.storable import (
    ACTOR_CHARS,
    COLUMN_LIMITS,
    HANDLE_CHARS,
    scope_problems,
    text_problems,
    unstorable,
)
from memory.write_audit import WriteAudit

if TYPE_CHECKING:
    from memory.unit import RowAccess

TRUSTED_SOURCES = frozenset({Source.STATED, Source.OPERATOR})
CURRENT = frozenset({Status.ACTIVE, Status.PENDING_REVIEW})
"""A memory's statuses while it is current; the others are history (superseded,
rejected, expired, merged), which no retry or edit rewrites."""


def apply(rows: RowAccess, op: ApplyOp) -> WriteReceipt:
    _check_scopes(op.candidates)
    if problems := [
        *(["receipt handle is empty"] if not op.handle.strip() else []),
        *text_problems("receipt handle", op.handle, HANDLE_CHARS),
        *text_problems("actor", op.actor, ACTOR_CHARS),
    ]:
        raise ValueError(f"{'; '.join(problems)}; nothing was written")
    earlier = rows.get_receipt(op.handle)
    if earlier is not None:
        if op.candidates and earlier.tenant != op.candidates[0].scope.tenant:
            raise HandleTaken(
                f"receipt handle {op.handle!r} was used by another tenant's write;"
                " nothing was written"
            )
        return earlier
    keys = _Keys(op.candidates)
    if op.refusal is not None:  # nothing judged, nothing stored: no rows to look up
        rule, reason = op.refusal
        verdicts = [Verdict(Action.REFUSE, c.kind, reason, rule) for c in op.candidates]
        by_idem: dict[tuple[Scope, str], Memory] = {}
        active: dict[tuple[Scope, str], Memory] = {}
    else:
        existing = rows.ask_existing(keys.idempotency(), keys.slots())
        try:  # the gate needs no rows: it judges while the backend looks them up
            rules: dict[str, AgentRules] = {}
            verdicts = [judge(c, _rules(rules, op, c.provenance.agent)) for c in op.candidates]
        finally:
            by_idem, active = existing()
    batch = _Batch(rows, keys, by_idem, active)
    decisions = tuple(
        batch.apply_one(i, c, verdict, op.now)
        for i, (c, verdict) in enumerate(zip(op.candidates, verdicts, strict=True))
    )
    batch.flush()
    if op.refusal is None:  # the slots were read (or recalled): say what they now hold
        rows.settled({slot: batch.active.get(slot) for slot in keys.slots()})
    tenant = op.candidates[0].scope.tenant if op.candidates else ""
    run_id = op.candidates[0].provenance.run_id if op.candidates else ""
    receipt = WriteReceipt(op.handle, tenant, run_id, op.now, decisions)
    rows.save_receipt(
        receipt,
        WriteAudit(
            op.actor,
            tuple(c.scope for c in op.candidates),
            tuple(c.provenance.source.value for c in op.candidates),
        ),
    )
    return receipt


def _check_scopes(candidates: tuple[Candidate, ...]) -> None:
    """Refuse the batch if a candidate's scope cannot be stored: its rows, receipt and
    audit entries all carry it, so no candidate of the batch could be recorded."""
    seen: set[Scope] = set()
    for index, candidate in enumerate(candidates):
        if candidate.scope not in seen:
            seen.add(candidate.scope)
            if problems := scope_problems(candidate.scope):
                raise ScopeRefused(f"candidate {index}: {'; '.join(problems)}")


def _rules(known: dict[str, AgentRules], op: ApplyOp, agent: str) -> AgentRules:
    """`op.rules_for(agent)`, asked once per agent of a batch (it may read a file)."""
    if agent not in known:
        known[agent] = op.rules_for(agent)
    return known[agent]


def new_id(at: datetime) -> str:
    """A version 7 UUID (RFC 9562) as text: the Unix millisecond of `at` in its first
    48 bits, 74 random bits after. Rows written later sort later, so the primary key
    grows at its right edge instead of at random leaf pages, and a pass that walks
    the table in the order it was written (expiry, decay) meets the key in order
    too. Made by hand at a third of `uuid` module's cost: every stored candidate
    needs one."""
    h = os.urandom(10).hex()
    return f"{_stamp(at)}7{h[:3]}-{_VARIANT[h[3]]}{h[4:7]}-{h[7:19]}"


@functools.lru_cache(maxsize=16)
def _stamp(at: datetime) -> str:
    """The id's first two groups, from the Unix millisecond of `at` (an apply gives all
    its rows one `at`, so it is formatted once)."""
    stamp = f"{int(at.timestamp() * 1000) & 0xFFFF_FFFF_FFFF:012x}"
    return f"{stamp[:8]}-{stamp[8:]}-"


_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


def new_memory(
    candidate: Candidate,
    kind: Kind,
    status: Status,
    now: datetime,
    supersedes_id: str | None,
    idempotency_key: str = "",
) -> Memory:
    """The row a candidate becomes (fresh id, version 1)."""
    p = candidate.provenance
    # Positional, in field order, as `Memory.from_row`: the writer makes one per
    # stored candidate, and a frozen record's keyword call costs half as much again.
    return Memory(
        new_id(now),
        candidate.scope,
        kind,
        candidate.content,
        candidate.key,
        status,
        p.source,
        effective_confidence(candidate),
        p.reference or candidate.evidence,
        p.run_id,
        p.task_id,
        p.agent,
        p.subagent,
        p.schedule,
        stored_subject(p.subject),
        idempotency_key or candidate.effective_idempotency_key(),
        1,  # version
        1.0,  # score
        now,  # created_at
        now,  # valid_from
        candidate.valid_to,
        None,  # superseded_at
        supersedes_id,
        None,  # superseded_by_id
        now,  # last_reinforced_at
        None,  # last_used_at
    )


def stored_subject(subject: str) -> str:
    """The person a row is about, in one spelling (`folding.spelled`): "Ana", "Ana "
    and "Ａｎａ" are stored alike. Case is kept, as the person writes their name:
    comparisons fold it in the database (`folding.fold`), and a name lower-cased
    here need not be what PostgreSQL's `lower` makes of it ("İ"). NFKC can lengthen
    a text; a spelling too long for the column is kept as written (the gate checked
    that one), and is found all the same, since comparisons fold both sides."""
    if not subject:  # most memories are about no one in particular
        return subject
    spelling = spelled(subject)
    return spelling if len(spelling) <= _SUBJECT_CHARS else subject


_SUBJECT_CHARS = COLUMN_LIMITS["provenance.subject"]


class _Keys:
    """Each candidate's content hash, computed once (it names the default idempotency
    key and decides "same value" against earlier rows), and its idempotency key."""

    def __init__(self, candidates: tuple[Candidate, ...]) -> None:
        self.candidates = candidates
        self.digests = [content_hash(c.content) for c in candidates]
        self.idempotency_keys = [
            _idempotency_key(c, digest) for c, digest in zip(candidates, self.digests, strict=True)
        ]

    def idempotency(self) -> list[tuple[Scope, str]]:
        """(scope, idempotency key) of every candidate."""
        return [(c.scope, k) for c, k in zip(self.candidates, self.idempotency_keys, strict=True)]

    def slots(self) -> list[tuple[Scope, str]]:
        """(scope, folded key) of every keyed candidate."""
        return [(c.scope, folded_key(c.key)) for c in self.candidates if c.key]


class _Batch:
    """One apply's view of the rows it touches: read in one query, written in one.

    Existing rows for the batch's idempotency keys and slots are read up front
    (`active` is by scope and folded key);
    new rows are inserted together at the end, so a batch of N candidates costs a
    handful of statements rather than N round trips. Later candidates see earlier
    ones of the same batch (a retry inside a batch, two values for one slot).
    """

    def __init__(
        self,
        rows: RowAccess,
        keys: _Keys,
        by_idem: dict[tuple[Scope, str], Memory],
        active: dict[tuple[Scope, str], Memory],
    ) -> None:
        self.rows = rows
        self.digests = keys.digests
        self.idempotency_keys = keys.idempotency_keys
        self.by_idem, self.active = by_idem, active
        self.new: dict[str, Memory] = {}
        self.superseded: dict[str, str] = {}  # existing row id → its successor's id
        self.updated: set[str] = set()  # existing rows changed directly (a retry's new text)
        self.now: datetime | None = None

    def _set(self, memory: Memory, changes: dict[str, Any]) -> Memory:
        changed = dataclasses.replace(memory, **changes)
        if memory.id in self.new:
            self.new[memory.id] = changed
        else:  # never a row superseded earlier in the batch: `_not_replaceable`
            self.rows.update(memory.id, changes)
            self.updated.add(memory.id)
        self.by_idem[(memory.scope, memory.idempotency_key)] = changed
        slot = _slot(memory)
        if memory.key and self.active.get(slot, changed).id == memory.id:
            if changed.status is Status.ACTIVE:
                self.active[slot] = changed
            else:
                self.active.pop(slot, None)
        return changed

    def flush(self) -> None:
        if self.new:
            self.rows.insert_many(list(self.new.values()))
        if self.superseded and self.now is not None:
            self.rows.supersede_many(self.superseded, self.now)

    def _supersede(self, current: Memory, new_id: str, now: datetime) -> None:
        changes = _superseded(current, new_id, now)
        if current.id in self.new or current.id in self.updated:
            # A row this batch already changed takes its supersession the same way,
            # so that no row is written twice by one statement (`memory.pending`).
            self._set(current, changes)
            return
        # An existing row: one UPDATE for every supersession of the batch, at flush.
        self.superseded[current.id] = new_id
        self.now = now
        changed = dataclasses.replace(current, **changes)
        self.by_idem[(current.scope, current.idempotency_key)] = changed
        self.active.pop(_slot(current), None)

    def apply_one(
        self, index: int, candidate: Candidate, verdict: Verdict, now: datetime
    ) -> Decision:
        if verdict.action is Action.REFUSE:
            return Decision(
                index, Outcome.REFUSED, verdict.kind.value, verdict.rule, verdict.reason
            )
        kind = verdict.kind
        status = Status.ACTIVE if verdict.action is Action.ACCEPT else Status.PENDING_REVIEW
        rule, reason = verdict.rule, verdict.reason
        digest = self.digests[index]
        idempotency_key = self.idempotency_keys[index]

        earlier = self.by_idem.get((candidate.scope, idempotency_key))
        if earlier is not None:
            if content_hash(earlier.content) == digest and earlier.kind is kind:
                return Decision(
                    index,
                    Outcome.DUPLICATE,
                    kind.value,
                    "idempotent",
                    "the same write was applied before",
                    earlier.id,
                )
            if why_not := _not_replaceable(earlier, candidate, status):
                return Decision(
                    index,
                    Outcome.REFUSED,
                    kind.value,
                    "idempotency-conflict",
                    f"idempotency key {idempotency_key!r} names memory {earlier.id}, {why_not}",
                    earlier.id,
                )
            self._set(
                earlier,
                {"content": candidate.content, "kind": kind, "version": earlier.version + 1},
            )
            return Decision(
                index,
                Outcome.REPLACED,
                kind.value,
                "idempotent",
                "a retry of an earlier write replaced it",
                earlier.id,
            )

        current = None
        if status is Status.ACTIVE and candidate.key:
            current = self.active.get(_slot(candidate))
            if current is not None and content_hash(current.content) == digest:
                return Decision(
                    index,
                    Outcome.DUPLICATE,
                    kind.value,
                    "same-value",
                    f"key {candidate.key!r} already holds this value",
                    current.id,
                )
            if (
                current is not None
                and current.source in TRUSTED_SOURCES
                and candidate.provenance.source not in TRUSTED_SOURCES
            ):
                status, current = Status.PENDING_REVIEW, None
                rule = "stated-beats-inferred"
                reason = (
                    f"key {candidate.key!r} holds the person's own statement; "
                    "an agent's value waits for review"
                )

        row = new_memory(
            candidate, kind, status, now, current.id if current else None, idempotency_key
        )
        if current is not None:
            self._supersede(current, row.id, now)
        self.new[row.id] = row
        self.by_idem[(row.scope, row.idempotency_key)] = row
        if row.key and row.status is Status.ACTIVE:
            self.active[_slot(row)] = row
        if current is not None:
            return Decision(index, Outcome.SUPERSEDED, kind.value, rule, reason, row.id, current.id)
        outcome = Outcome.STORED if status is Status.ACTIVE else Outcome.REVIEW
        return Decision(index, outcome, kind.value, rule, reason, row.id)


def _slot(memory: Memory | Candidate) -> tuple[Scope, str]:
    """The (scope, folded key) a keyed row or candidate holds: `_Batch.active`'s key."""
    return memory.scope, folded_key(memory.key)


def _not_replaceable(earlier: Memory, candidate: Candidate, status: Status) -> str:
    """Why a candidate may not replace the text of the row its idempotency key names
    ("" when it may). A retry is the same write again: from the same source, judged
    to the same standing, onto a row that is still current. Anything else would let
    an agent's value into a person's statement, or skip review, or rewrite history."""
    if earlier.status not in CURRENT:
        return f"which is {earlier.status.value}; history is not rewritten"
    if earlier.source is not candidate.provenance.source:
        return (
            f"written from {earlier.source.value}; a write from"
            f" {candidate.provenance.source.value} cannot replace it"
        )
    if earlier.status is not status:
        return (
            f"which is {earlier.status.value}; this write would be"
            f" {status.value}, so it cannot replace it"
        )
    return ""


def _idempotency_key(candidate: Candidate, digest: str) -> str:
    """`candidate.effective_idempotency_key()`, given its content hash already made."""
    if candidate.idempotency_key:
        return candidate.idempotency_key
    p = candidate.provenance
    return f"{p.task_id or p.run_id}:{candidate.key or digest}"


def _superseded(old: Memory, new_id: str, now: datetime) -> dict[str, Any]:
    return {
        "status": Status.SUPERSEDED,
        "superseded_at": now,
        "valid_to": now,
        "superseded_by_id": new_id,
        "version": old.version + 1,
    }


def _supersede(rows: RowAccess, old: Memory, new_id: str, now: datetime) -> None:
    rows.update(old.id, _superseded(old, new_id, now))


def _one(rows: RowAccess, readable: Any, memory_id: str) -> Memory:
    found = rows.by_ids(readable, [memory_id])
    if not found:
        raise MemoryNotFound(f"no memory {memory_id!r} is readable by this scope")
    return found[0]


def check_content(content: str) -> None:
    """The rules every stored text obeys, for content that does not pass the gate."""
    if is_blank(content):
        raise EditRefused("content is empty")
    if len(content) > DEFAULT_CONFIG.max_content_chars:
        raise EditRefused(
            f"content has {len(content)} characters, more than {DEFAULT_CONFIG.max_content_chars}"
        )
    if what := unstorable(content):
        raise EditRefused(f"content holds {what}; the store cannot keep it")
    kinds = sorted({f.kind for f in find_secrets_as_read(content)})
    if kinds:
        raise EditRefused(f"secret ({', '.join(kinds)}) in content; secrets are never stored")


def check_reason(reason: str) -> None:
    """An operator's reason lands in the audit trail as written: it obeys the rules of
    every stored text too (a reason like "old password: hunter2" is refused)."""
    if what := unstorable(reason):
        raise EditRefused(f"reason holds {what}; the store cannot keep it")
    kinds = sorted({f.kind for f in find_secrets_as_read(reason)})
    if kinds:
        raise EditRefused(f"secret ({', '.join(kinds)}) in reason; secrets are never stored")


def edit(rows: RowAccess, op: EditOp) -> EditResult:
    check_content(op.content)
    check_reason(op.reason)
    before = _one(rows, op.readable, op.memory_id)
    if before.status not in CURRENT:
        successor = (
            f"; edit its successor {before.superseded_by_id}" if before.superseded_by_id else ""
        )
        raise EditRefused(
            f"memory {before.id} is {before.status.value}: history is not edited{successor}"
        )
    stale = before.version != op.expected_version
    if stale and not op.force:
        raise EditConflict(op.expected_version, before, op.content)
    kept = _kept_before_edit(before, op.now)
    changes = {
        "content": op.content,
        "version": before.version + 1,
        "source": Source.OPERATOR,
        "confidence": SOURCE_CONFIDENCE[Source.OPERATOR],
        "valid_from": op.now,
        "supersedes_id": kept.id,
    }
    if not rows.update(before.id, changes, expected_version=before.version):
        raise EditConflict(op.expected_version, _one(rows, op.readable, op.memory_id), op.content)
    rows.insert_many([kept])
    after = _one(rows, op.readable, op.memory_id)
    rows.record_audit(
        [
            AuditEntry(
                at=op.now,
                actor=op.actor,
                action="edit.forced" if stale else "edit",
                memory_id=before.id,
                tenant=before.scope.tenant,
                detail={
                    "reason": op.reason,
                    "expected_version": op.expected_version,
                    "from_version": before.version,
                    "to_version": after.version,
                    "forced": stale,
                    "hash_before": content_hash(before.content),
                    "hash_after": content_hash(after.content),
                    "kept_as": kept.id,
                },
            )
        ]
    )
    return EditResult(applied=True, forced=stale, before=before, current=after)


def _kept_before_edit(before: Memory, now: datetime) -> Memory:
    """The version an edit replaces, kept as history under a new id, superseded by the
    edited row. The edited row keeps its id (what names it, a run's record or a
    caller's next edit, still finds it) and its idempotency key (a retry of the
    write that made it meets the operator's word, not a free slot)."""
    kept_id = new_id(now)
    return dataclasses.replace(
        before,
        id=kept_id,
        idempotency_key=f"edited:{kept_id}",
        status=Status.SUPERSEDED,
        superseded_at=now,
        valid_to=now,
        superseded_by_id=before.id,
    )


def review(rows: RowAccess, op: ReviewOp) -> Memory:
    check_reason(op.reason)
    found = _one(rows, op.readable, op.memory_id)
    if found.status is not Status.PENDING_REVIEW:
        raise NotPending(f"memory {found.id} is {found.status.value}, not waiting for review")
    entries = []
    if op.approve:
        current = rows.active_by_key(found.scope, found.key) if found.key else None
        changes: dict[str, Any] = {
            "status": Status.ACTIVE,
            "valid_from": op.now,
            "version": found.version + 1,
        }
        if current is not None:
            changes["supersedes_id"] = current.id
            _supersede(rows, current, found.id, op.now)
            entries.append(("supersede", current.id, {"superseded_by": found.id}))
        rows.update(found.id, changes)
        entries.append(("review.approved", found.id, {"reason": op.reason}))
    else:
        rows.update(found.id, {"status": Status.REJECTED, "version": found.version + 1})
        entries.append(("review.rejected", found.id, {"reason": op.reason}))
    rows.record_audit(
        [
            AuditEntry(op.now, op.actor, action, memory_id, found.scope.tenant, detail)
            for action, memory_id, detail in entries
        ]
    )
    return _one(rows, op.readable, op.memory_id)
