"""The memory writer: the only code path that writes memory.

It runs as the consumer of the `memory.write` queue (concurrency 1 per shard, so
one writer per scope); the store judges every candidate through the policy gate
and applies the batch in one transaction before the task is acknowledged.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from memory.policy import AgentRules
from memory.receipts import WriteReceipt
from memory.records import Candidate

log = logging.getLogger(__name__)


def apply(rt: Any, handle: str, candidates: Sequence[Candidate]) -> WriteReceipt:
    receipt = rt.store.apply(
        candidates, handle=handle, actor="writer", rules_for=lambda agent: AgentRules.default()
    )
    log.info(
        "write %s applied",
        handle,
        extra={"action": "write.applied", "handle": handle, **receipt.counts()},
    )
    return receipt
