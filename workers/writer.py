"""The memory writer: the only code path that writes memory.

It runs as the consumer of the `memory.write` queue (concurrency 1 per shard, so
one writer per scope); the store judges every candidate through the policy gate
with the writing agent's attachment (`NIGHTSHIFT_AGENT_RULES`, see
`memory.attachment`) and applies the batch in one transaction before the task is
acknowledged.

Whom a run acted for is read here, from the run's record (`person_of_run`), and
set on every candidate it sent (`Provenance.acting_for`) over whatever the
candidate said: the gate keeps a run acting for Ana from writing where Bob's runs
read (`memory.policy`), so that fact cannot come from the agent.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any

from memory.attachment import from_path
from memory.engine import autocommit, retrying
from memory.policy import SOMEONE
from memory.receipts import WriteReceipt
from memory.records import Candidate
from workers import runs

log = logging.getLogger(__name__)

WRITER_CRASHED = "writer-crashed"
"""The rule on a receipt of a batch given up unjudged (`give_up`): not one of the
gate's rules (`memory.policy.Rule`), which judge candidates."""

OPERATOR_HANDLE_PREFIX = "cli:"
"""Handles of writes submitted by the operator's `nightshift memory write`."""


def apply(
    rt: Any, handle: str, candidates: Sequence[Candidate], *, acting_for: str
) -> WriteReceipt:
    """Apply `candidates` under `handle`; `acting_for` is `person_of_run` of the run
    that sent them ("" for a write that is no run's)."""
    rules_for = from_path(rt.settings.agent_rules)
    receipt = rt.store.apply(
        [_acting_for(c, acting_for) for c in candidates],
        handle=handle,
        actor=_actor(handle),
        rules_for=rules_for,
    )
    log.info(
        "write %s applied",
        handle,
        extra={"action": "write.applied", "handle": handle, **receipt.counts()},
    )
    return receipt


def give_up(
    rt: Any,
    handle: str,
    batches: Sequence[tuple[str, Sequence[Candidate]]],
    attempts: int,
    *,
    votes: int,
) -> list[WriteReceipt]:
    """Refuse every candidate of message `handle`, which came back unfinished `attempts` times,
    unjudged (judging it may be what stops the writer): a receipt per batch, an
    audit entry per candidate, nothing stored."""
    reason = (
        f"not applied: the writer stopped (killed, out of memory, or a crash) on each of"
        f" {attempts} attempts at this batch; nothing of it was stored; write it again to"
        " retry (NIGHTSHIFT_WRITE_MAX_ATTEMPTS)"
    )
    receipts = [
        rt.store.refuse(batch, handle=h, actor=_actor(h), rule=WRITER_CRASHED, reason=reason)
        for h, batch in batches
    ]
    log.warning(
        "write %s given up after %d attempts: %d candidates refused, %d votes dropped",
        handle,
        attempts,
        sum(len(batch) for _, batch in batches),
        votes,
        extra={"action": "write.given_up", "handle": handle, "attempts": attempts},
    )
    return receipts


def _actor(handle: str) -> str:
    return "operator-cli" if handle.startswith(OPERATOR_HANDLE_PREFIX) else "writer"


@retrying()
def person_of_run(rt: Any, run_key: str) -> str:
    """The user run `run_key` acted for, from its record: "" for a run with no person
    and for no run at all (`run_key` empty: the operator's CLI). A run whose record is
    gone acted for someone unknown (`memory.policy.SOMEONE`): what it wrote for other
    people waits for review rather than passing for a tenant's run."""
    if not run_key:
        return ""
    with autocommit(rt.engine) as conn:
        user = runs.user_of(conn, run_key)
    if user is None:
        log.warning(
            "no record of run %s: its writes are judged as a person's",
            run_key,
            extra={"action": "write.run_unknown", "run_key": run_key},
        )
        return SOMEONE
    return user


def _acting_for(candidate: Candidate, person: str) -> Candidate:
    if candidate.provenance.acting_for == person:
        return candidate
    provenance = dataclasses.replace(candidate.provenance, acting_for=person)
    return candidate.replace(provenance=provenance)
