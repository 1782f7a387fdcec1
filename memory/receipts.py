"""What the writer decided, per candidate: the write receipt a run can poll by handle."""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory.quick_init import quick_init


class Outcome(enum.StrEnum):
    STORED = "stored"
    SUPERSEDED = "superseded"  # stored, and replaced the active memory with the same key
    DUPLICATE = "duplicate"  # same idempotency key, same content: nothing changed
    REPLACED = "replaced"  # same idempotency key, new content: the earlier write was updated
    REVIEW = "review"  # queued for review, not loaded until approved
    REFUSED = "refused"


@quick_init
@dataclass(frozen=True, slots=True)
class Decision:
    """The fate of one candidate. Never carries the candidate's content."""

    index: int
    outcome: Outcome
    kind: str
    rule: str
    reason: str
    memory_id: str | None = None
    superseded_id: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any] | list[Any]) -> Decision:
        """A decision as `to_json` or, as a receipt stores it, `stored` wrote it."""
        if isinstance(data, list):
            index, outcome, kind, rule, reason, memory_id, superseded_id = data
            return cls(index, Outcome(outcome), kind, rule, reason, memory_id, superseded_id)
        return cls(**{**data, "outcome": Outcome(data["outcome"])})

    def stored(self) -> list[Any]:
        """The decision as a receipt stores it: `to_json`'s values without their names,
        in field order (a receipt holds one per candidate; the names were half of it)."""
        return [
            self.index,
            self.outcome.value,
            self.kind,
            self.rule,
            self.reason,
            self.memory_id,
            self.superseded_id,
        ]

    def to_json(self) -> dict[str, Any]:
        """The same dict as `dataclasses.asdict`, built directly: a receipt is written
        for every batch, and `asdict`'s deep copy was a measurable part of it."""
        return {
            "index": self.index,
            "outcome": self.outcome.value,
            "kind": self.kind,
            "rule": self.rule,
            "reason": self.reason,
            "memory_id": self.memory_id,
            "superseded_id": self.superseded_id,
        }


@dataclass(frozen=True, slots=True)
class WriteReceipt:
    handle: str
    tenant: str
    run_id: str
    created_at: datetime
    decisions: tuple[Decision, ...]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for d in self.decisions:
            out[d.outcome.value] = out.get(d.outcome.value, 0) + 1
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "handle": self.handle,
            "tenant": self.tenant,
            "run_id": self.run_id,
            "created_at": self.created_at.isoformat(),
            "counts": self.counts(),
            "decisions": [d.to_json() for d in self.decisions],
        }

    def decisions_json(self) -> str:
        """The decisions as the store keeps them (`Decision.stored`); receipts written
        before kept `to_json`'s, which `Decision.from_json` reads too."""
        return json.dumps([d.stored() for d in self.decisions])
