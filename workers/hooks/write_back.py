"""Write-back: the run's candidates, votes and follow-ups leave as ONE writer message.

Only a run that finished well (`succeeded`, `partial`) submits its candidates and
votes; a failed, timed-out, cancelled or rejected run submits only its attempt.
A subagent run is different: its result goes to the writer whatever its state,
marked with that state, and the gate keeps anything but a success as an episode
at most (`workers.subagents.as_subagent_result`).

The idempotency key defaults to `<run key>:<key or content hash>`, so a re-run of
the same key writes nothing new. A run that votes records what it was given on
its row before the message leaves: the writer counts each vote against that
record (`memory.vote_rights`), and would otherwise race the record hook.
"""

from __future__ import annotations

import dataclasses
import logging

from memory.engine import autocommit, retrying
from memory.records import Candidate, Source, content_hash
from memory.storable import HANDLE_CHARS
from workers import runs
from workers.hooks import Hook
from workers.hooks.state import RunState
from workers.runs import RunStatus, fit
from workers.subagents import as_subagent_result, parent_agent

log = logging.getLogger(__name__)

KEEPS_OUTPUT = frozenset({RunStatus.SUCCEEDED, RunStatus.PARTIAL})


class WriteBackHook(Hook):
    name = "write_back"

    def after_run(self, state: RunState) -> None:
        if state.retry:
            return
        candidates = self._candidates(state)
        votes = []
        if state.status in KEEPS_OUTPUT and state.ctx is not None:
            votes = [
                {
                    "memory_id": v.memory_id,
                    "direction": v.direction,
                    "voter": state.run.agent,
                    "run_id": state.key,
                }
                for v in state.ctx.votes
            ]
        if not (candidates or votes or state.followups):
            return
        if votes:
            _record_given(state)
        handle = receipt_handle("write", state.key)
        state.submit(
            handle,
            state.key,
            [c.to_json() for c in candidates],
            votes=votes,
            followups=state.followups,
            tenant=state.run.tenant,  # picks the writer shard; not part of the message
        )
        state.submitted = len(candidates)
        state.write_handle = handle if candidates else ""

    def _candidates(self, state: RunState) -> list[Candidate]:
        if state.run.parent_key:
            if state.status is RunStatus.REJECTED:
                return []
            return as_subagent_result(
                state.run, state.status, state.candidates(), parent_agent(state)
            )
        if state.status not in KEEPS_OUTPUT:
            return []
        return [with_idempotency(as_agent_output(c), state.key) for c in state.candidates()]


@retrying()
def _record_given(state: RunState) -> None:
    with autocommit(state.rt.engine) as conn:
        if not runs.record_given(conn, state.key, state.owner, state.given_ids):
            log.warning(
                "lost the lease before recording what the run was given; its votes will"
                " be judged against an older record",
                extra={"action": "run.lease_lost", "run_key": state.key},
            )


def receipt_handle(prefix: str, run_key: str) -> str:
    """`<prefix>:<run key>`, shortened with a hash when it would not fit a receipt handle."""
    return fit(f"{prefix}:", run_key, HANDLE_CHARS)


def stored_handle(handle: str) -> str:
    """A handle as the store keeps it: `write:<run key>` written out in full (what a
    person types, whatever the run key's length) shortened as `receipt_handle` did."""
    if len(handle) <= HANDLE_CHARS:
        return handle
    prefix, _, run_key = handle.partition(":")
    return receipt_handle(prefix, run_key)


def as_agent_output(candidate: Candidate) -> Candidate:
    """An agent speaks for itself: it cannot claim the person's or the operator's voice.

    Only the CLI and API (the person, the operator) submit `stated` or `operator`
    candidates; from a run such a claim is kept as what it is, an inference, so the
    gate judges it as one (instructions refused, facts below the bar to review).
    """
    if candidate.provenance.source not in (Source.STATED, Source.OPERATOR):
        return candidate
    claimed = candidate.provenance.source.value
    return candidate.replace(
        provenance=dataclasses.replace(candidate.provenance, source=Source.INFERRED),
        meta={**candidate.meta, "claimed_source": claimed},
    )


def with_idempotency(candidate: Candidate, run_key: str) -> Candidate:
    """Default key: the run key and the slot, so a re-run of the same key writes nothing new."""
    if candidate.idempotency_key:
        return candidate
    slot = candidate.key or content_hash(candidate.content)
    return candidate.replace(idempotency_key=f"{run_key}:{slot}")
