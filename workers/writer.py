"""The memory writer: the only code path that writes memory.

It runs as the consumer of the `memory.write` queue (concurrency 1 per shard, so
one writer per scope); the store judges every candidate through the policy gate
with the writing agent's attachment (`NIGHTSHIFT_AGENT_RULES`, see
`memory.attachment`) and applies the batch in one transaction before the task is
acknowledged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from memory.attachment import from_path
from memory.receipts import WriteReceipt
from memory.records import Candidate

log = logging.getLogger(__name__)

OPERATOR_HANDLE_PREFIX = "cli:"
"""Handles of writes submitted by the operator's `nightshift memory write`."""


def apply(
    rt: Any, handle: str, candidates: Sequence[Candidate], *, run_key: str = ""
) -> WriteReceipt:
    rules_for = from_path(rt.settings.agent_rules)
    actor = "operator-cli" if handle.startswith(OPERATOR_HANDLE_PREFIX) else "writer"
    receipt = rt.store.apply(candidates, handle=handle, actor=actor, rules_for=rules_for)
    log.info(
        "write %s applied",
        handle,
        extra={"action": "write.applied", "handle": handle, **receipt.counts()},
    )
    return receipt
