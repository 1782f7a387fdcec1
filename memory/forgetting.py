"""Forgetting that can be proven: delete, rebuild what carried it, re-list, report.

Only the person a memory is about and the operator may make memory forget; an
agent's request (peer or not) is refused and the refusal audited. A person's
forget reaches, counts and reports only the memories about them. A forget
removes the matching memories, their superseded versions, their full-text
entries (FTS5 is optimised so deleted tokens leave its segments; PostgreSQL's
table is vacuumed), pending review items (they are rows too), and rebuilds
whatever carried them: merged memories (another contributor takes over), episode
summaries (rewritten from the episodes that remain) and hot summaries. Audit
rows never held content; they are marked redacted. A tombstone keeps who, when,
why, how many and which ids, never the text or the pattern; an import that
brings it to another database forgets those ids there too (`memory.forget_replay`).

Who may ask and what a selector reaches are `memory.forget_selection`'s: a
person and a text are found in every spelling that reads the same — case,
surrounding and repeated white space, invisible characters, NFKC forms, Cyrillic
and Greek letters that pass for Latin ones — by the delete and by the re-count
alike (`memory.folding.unconfused`, in the database).

Afterwards every place is listed again. The report says
`scanned = skipped + deleted + failed` (checked before it is returned),
`remaining`, and `exhaustive: false` with the reason when the listing stopped
at its batch limit.

    report = forget(engine, Selector.by_subject("acme", "ana"), Requester.person("ana"),
                    reason="asked on 2026-12-01", now=now)
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, Connection, Engine, and_, insert, literal, update

from memory.folding import folded
from memory.forget_places import TextPlace, scrub
from memory.forget_removal import compact_fulltext, contents_of, listing, remove
from memory.forget_replay import ids_text
from memory.forget_selection import Requester, Role, Selector, SelectorKind, allowed
from memory.forget_verification import count_where, relist, still_held
from memory.maintenance_tables import tombstones
from memory.tables import audit, memories
from memory.writing import check_reason

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 10_000
VERIFY_TEXTS = 200


class ForgetRefused(PermissionError):
    """The requester may not make memory forget (agents never may)."""


class ReportArithmeticError(AssertionError):
    """scanned != skipped + deleted + failed: the report would lie, so none is returned."""


@dataclass(frozen=True, slots=True)
class ForgetReport:
    tombstone_id: str
    selector: dict[str, Any]
    scanned: int
    skipped: int
    deleted: int
    failed: int
    remaining: int
    exhaustive: bool
    reason: str = ""  # why the report is partial ("" when exhaustive)
    places: dict[str, int] = field(default_factory=dict)
    rebuilt: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    requested_reason: str = ""  # why it was asked, as the tombstone keeps it

    def check(self) -> ForgetReport:
        if self.scanned != self.skipped + self.deleted + self.failed:
            raise ReportArithmeticError(
                f"forget report does not add up: scanned {self.scanned} != skipped {self.skipped}"
                f" + deleted {self.deleted} + failed {self.failed}"
            )
        if not self.exhaustive and not self.reason:
            raise ReportArithmeticError("a partial forget report must say why")
        return self

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["notes"] = list(self.notes)
        return out


def forget(
    engine: Engine,
    selector: Selector,
    requester: Requester,
    *,
    now: datetime,
    reason: str = "",
    limit: int = DEFAULT_LIMIT,
    compact: bool = True,
    places: Sequence[TextPlace] = (),
) -> ForgetReport:
    """Forget what `selector` matches, for `requester`; return the verified report.

    `places` are tables outside memory that may quote the forgotten text (a run's
    summary or payload); it is scrubbed there too and they are re-listed.

    A person's forget reaches only the memories about them: what the selector
    matches besides is neither listed nor counted (not even as skipped), so its
    report is the one it would be were those memories not there — a text, a run
    or an id that matches only someone else's memories is answered as one that
    matches nothing, and tells the person nothing about them.

    Raises ForgetRefused (after auditing the refusal) for an agent, and for a person
    asking to forget by another person's name (`Selector.names_someone_else`):
    decided by the request alone, whatever is stored. A refusal writes no
    tombstone, which would record a forget that never happened (and that imports
    and audits would then account for). Raises EditRefused for a reason holding a
    secret (the tombstone would keep it for good).
    """
    check_reason(reason)
    if requester.role in (Role.AGENT, Role.MAINTENANCE) or not folded(requester.name):
        _refuse(engine, selector, requester, now, AGENTS_REFUSED)
    if requester.role is Role.PERSON and selector.names_someone_else(requester.name):
        _refuse(engine, selector, requester, now, NOT_THEIRS)
    reach = allowed(requester)
    where = selector.where() if requester.role is Role.OPERATOR else and_(selector.where(), reach)
    return _run(
        engine,
        selector.tenant,
        where,
        reach,
        selector.describe(),
        requester,
        now=now,
        reason=reason,
        limit=limit,
        compact=compact,
        contributors_too=selector.kind is SelectorKind.ID,
        verify_texts=VERIFY_TEXTS,
        places=places,
        lookalike=selector.lookalike(),
    )


def delete_where(
    engine: Engine,
    tenant: str,
    where: ColumnElement[bool],
    *,
    now: datetime,
    reason: str,
    limit: int = DEFAULT_LIMIT,
    compact: bool = True,
    verify_texts: int = 20,
    places: Sequence[TextPlace] = (),
) -> ForgetReport:
    """The same deletion path for maintenance (purge of expired rows), with a tombstone.

    `compact=False` leaves full-text compaction to the caller (one
    `compact_fulltext` after purging many tenants instead of one per tenant).
    """
    return _run(
        engine,
        tenant,
        and_(memories.c.tenant == tenant, where),
        literal(True),
        {"by": SelectorKind.PURGE.value},
        Requester(Role.MAINTENANCE, "purge"),
        now=now,
        reason=reason,
        limit=limit,
        compact=compact,
        contributors_too=True,  # an expired merge or summary takes what it absorbed along
        verify_texts=verify_texts,
        places=places,
    )


AGENTS_REFUSED = "only-person-or-operator"
NOT_THEIRS = "not-about-requester"


def _refuse(
    engine: Engine, selector: Selector, requester: Requester, now: datetime, rule: str
) -> None:
    """Audit the refusal (its own transaction: nothing else is written) and raise."""
    with engine.begin() as conn:
        conn.execute(
            insert(audit).values(
                at=now,
                actor=requester.actor,
                action="forget.refused",
                memory_id=None,
                tenant=selector.tenant,
                detail=json.dumps({**selector.describe(), "rule": rule}),
            )
        )
    log.warning(
        "forget refused", extra={"action": "forget.refused", "actor": requester.actor, "rule": rule}
    )
    if rule == NOT_THEIRS:
        raise ForgetRefused(
            f"{requester.actor} may forget only memory about {requester.name!r}, not about"
            f" {selector.value!r} (in tenant {selector.tenant!r}): nothing was forgotten and no"
            " tombstone written (the refusal is audited); the person it is about or the"
            " operator may forget it"
        )
    raise ForgetRefused(
        f"{requester.actor} may not forget memory in tenant {selector.tenant!r}: only the person "
        "the memory is about or the operator may (the refusal is audited)"
    )


def _run(
    engine: Engine,
    tenant: str,
    where: ColumnElement[bool],
    allowed: ColumnElement[bool],
    described: dict[str, Any],
    requester: Requester,
    *,
    now: datetime,
    reason: str,
    limit: int,
    compact: bool,
    contributors_too: bool,
    verify_texts: int,
    places: Sequence[TextPlace] = (),
    lookalike: ColumnElement[bool] | None = None,
) -> ForgetReport:
    tombstone_id = str(uuid.uuid4())
    with engine.begin() as conn:
        # Episode summaries are rebuilt from what remains, not matched directly;
        # forget by id and purge (an expired summary) address them as rows.
        whole_rows = contributors_too or requester.role is Role.MAINTENANCE
        plan = listing(conn, where, allowed, limit, contributors_too, whole_rows)
        texts = contents_of(conn, plan.delete)
        deleted, rebuilt = remove(conn, plan.delete, tenant, now)
        gone = {t for t in texts if not still_held(conn, tenant, t)}
        for place in places:
            rebuilt[place.name] = scrub(conn, place, tenant, gone)
        failed = len(plan.delete) - len(deleted)
        # A person's request is recorded even when nothing matched; an idle purge is not.
        quiet = requester.role is Role.MAINTENANCE and plan.listed == 0
        tombstone_id = "" if quiet else tombstone_id
        if not quiet:
            _record(conn, tombstone_id, tenant, requester, described, reason, deleted, now)
    notes = compact_fulltext(engine) if compact and deleted else ()
    if deleted and not compact:
        notes = ("full-text compaction left to the caller (compact=False)",)
    found, more_notes = relist(engine, tenant, deleted, texts, verify_texts, places)
    remaining = count_where(engine, and_(where, allowed)) + sum(found.values())
    alike = count_where(engine, and_(lookalike, allowed)) if lookalike is not None else 0
    exhaustive, why = _verdict(plan.truncated, limit, remaining, alike)
    report = ForgetReport(
        tombstone_id=tombstone_id,
        selector=described,
        scanned=plan.listed,
        skipped=plan.skipped,
        deleted=len(deleted),
        failed=failed,
        remaining=remaining,
        exhaustive=exhaustive,
        reason=why,
        places=found,
        rebuilt=rebuilt,
        notes=(*notes, *more_notes),
        requested_reason=reason[:_REASON_CHARS],
    ).check()
    if tombstone_id:
        with engine.begin() as conn:
            conn.execute(
                update(tombstones)
                .where(tombstones.c.id == tombstone_id)
                .values(
                    report=json.dumps(
                        {k: v for k, v in report.to_json().items() if k != "selector"}
                    )
                )
            )
    log.info(
        "forget done",
        extra={
            "action": "forget",
            "tombstone": tombstone_id,
            "deleted": report.deleted,
            "remaining": remaining,
        },
    )
    return report


def _verdict(truncated: bool, limit: int, remaining: int, alike: int) -> tuple[bool, str]:
    """Whether the forget may call itself exhaustive, and if not, why."""
    if truncated:
        return False, f"listing stopped at the batch limit of {limit} rows; run the forget again"
    if remaining:
        return False, f"{remaining} matching rows or traces remain after the delete"
    if alike:
        return False, (
            f"{alike} {'memory holds' if alike == 1 else 'memories hold'} the text with other accents or letter forms (as 'Lukasz'"
            " for 'Łukasz'), which it does not delete: if they are the same, forget them"
            " by --id or by their own spelling"
        )
    return True, ""


_REASON_CHARS = 500
"""The longest reason a tombstone keeps."""


def _record(
    conn: Connection,
    tombstone_id: str,
    tenant: str,
    requester: Requester,
    described: dict[str, Any],
    reason: str,
    deleted: set[str],
    now: datetime,
) -> None:
    """The tombstone and the audit entry: who, when, why, how many, and which ids (so
    an import elsewhere can forget them too, `memory.forget_replay`); never the text."""
    conn.execute(
        insert(tombstones).values(
            id=tombstone_id,
            at=now,
            tenant=tenant,
            actor=requester.actor,
            role=requester.role.value,
            selector=described["by"],
            reason=reason[:_REASON_CHARS],
            deleted=len(deleted),
            report="{}",
            memory_ids=ids_text(deleted),
        )
    )
    conn.execute(
        insert(audit).values(
            at=now,
            actor=requester.actor,
            action="forget",
            memory_id=None,
            tenant=tenant,
            detail=json.dumps({**described, "tombstone": tombstone_id, "deleted": len(deleted)}),
        )
    )


__all__ = [
    "ForgetRefused",
    "ForgetReport",
    "Requester",
    "Role",
    "Selector",
    "SelectorKind",
    "TextPlace",
    "compact_fulltext",
    "delete_where",
    "forget",
]
