"""What the LangGraph adapter raises, beyond LangGraph's own `InvalidNamespaceError`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory.receipts import Outcome
from memory.records import Scope


@dataclass(frozen=True, slots=True)
class Refusal:
    """One put that was not applied: the gate refused it or held it for review."""

    namespace: tuple[str, ...]
    key: str
    outcome: str  # "refused" | "review"
    rule: str
    reason: str

    def describe(self) -> str:
        fate = "refused" if self.outcome == Outcome.REFUSED.value else "held for review"
        return f"{self.namespace}/{self.key!r} {fate} by rule {self.rule!r}: {self.reason}"


class PutRefused(ValueError):
    """Nightshift's write gate did not apply one or more puts of a batch.

    `refusals` names each put, the gate's rule and its reason; `handle` is the
    write receipt (`Store.receipt(handle)`) with every decision of the batch.
    """

    def __init__(self, scope: Scope, handle: str, refusals: Sequence[Refusal]) -> None:
        self.scope = scope
        self.handle = handle
        self.refusals = tuple(refusals)
        listed = "; ".join(r.describe() for r in self.refusals)
        super().__init__(
            f"{len(self.refusals)} put(s) in scope {scope} not stored: {listed} "
            f"(receipt {handle}; other puts of the batch were applied)"
        )


class ScanBoundExceeded(RuntimeError):
    """A search or listing needs more rows than the adapter's `scan_limit` reads."""


class ConcurrentChange(RuntimeError):
    """A row kept changing between reading and retiring it (three attempts)."""
