"""The port in front of every memory backend: one abstract `batch` over typed ops.

Modelled on LangGraph's `BaseStore`: a backend implements `batch(ops)` once, and
everything a caller does (`Store.apply`, `load`, `search`, `show`, `history`,
`edit`, `review`, `export`) is built on it in `memory/store.py`. A batch runs in
one transaction, so an op that reads then writes (apply, edit, review) sees no
interleaved writer.

Two backends implement it: `memory.sql.SqlBackend` (SQLAlchemy Core, PostgreSQL
and SQLite) and `memory.inmemory.InMemoryBackend` (dicts, for fast tests and
embedding). Both interpret ops with `memory.unit.perform` over their own
`RowAccess`, so the rules — gate, idempotency, supersession, audit — exist once.

Every read op carries `readable`: the exact scopes it may see, computed once by
`memory.access.readable_scopes` from the reader's scope, the agent's attachment
and the trigger's origin. A backend filters by it inside its query. The ops that
read *loadable* memory (load, pool, search) also carry the TTL configuration, and
a backend applies it to every row as it reads (`memory.expiry`): what is past its
TTL is not returned, whether or not the `expire` pass has marked it yet.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memory.expiry import DEFAULT_TTL, TtlConfig
from memory.policy import AgentRules
from memory.quick_init import quick_init
from memory.records import Candidate, Kind, Memory, Scope, Status

RulesFor = Callable[[str], AgentRules]


@dataclass(frozen=True, slots=True)
class ApplyOp:
    """Judge and apply `candidates`; the result is the `WriteReceipt`.

    With `refusal` (a rule and its reason) nothing is judged: every candidate is
    refused with it (`Store.refuse`)."""

    candidates: tuple[Candidate, ...]
    handle: str
    actor: str
    rules_for: RulesFor
    now: datetime
    refusal: tuple[str, str] | None = None


@dataclass(frozen=True, slots=True)
class LoadOp:
    """A run's load: hot kinds first, then the rest, ranked and bounded: a `Loaded`."""

    readable: tuple[Scope, ...]
    words: tuple[str, ...]
    now: datetime
    min_score: float
    limit: int
    max_chars: int
    ttl: TtlConfig = DEFAULT_TTL


@dataclass(frozen=True, slots=True)
class PoolOp:
    """Loadable memories of `kinds`, most text-relevant first: `[(Ranked, relevance)]`."""

    readable: tuple[Scope, ...]
    words: tuple[str, ...]
    now: datetime
    min_score: float
    kinds: tuple[Kind, ...]
    limit: int
    ttl: TtlConfig = DEFAULT_TTL


@dataclass(frozen=True, slots=True)
class SearchOp:
    """Loadable memories matching any of `words`: `[(Memory, relevance)]`."""

    readable: tuple[Scope, ...]
    words: tuple[str, ...]
    now: datetime
    min_score: float
    limit: int
    ttl: TtlConfig = DEFAULT_TTL


@dataclass(frozen=True, slots=True)
class ListOp:
    """Memories of the readable scopes, newest first; `statuses=None` means all.
    `whole_tenant`: every scope of the first readable scope's tenant instead (the
    operator's view of a tenant, e.g. its whole review queue)."""

    readable: tuple[Scope, ...]
    statuses: tuple[Status, ...] | None
    limit: int
    whole_tenant: bool = False


@dataclass(frozen=True, slots=True)
class HistoryOp:
    """Every version of `key` in the readable scopes, oldest first."""

    readable: tuple[Scope, ...]
    key: str


@dataclass(frozen=True, slots=True)
class GetOp:
    readable: tuple[Scope, ...]
    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ReceiptOp:
    handle: str


@dataclass(frozen=True, slots=True)
class EditOp:
    """Replace a memory's content if its version is still `expected_version` (or `force`)."""

    readable: tuple[Scope, ...]
    memory_id: str
    expected_version: int
    content: str
    actor: str
    reason: str
    force: bool
    now: datetime


@dataclass(frozen=True, slots=True)
class ReviewOp:
    """Approve (activate, superseding the key's active memory) or reject a pending memory."""

    readable: tuple[Scope, ...]
    memory_id: str
    approve: bool
    actor: str
    reason: str
    now: datetime


@dataclass(frozen=True, slots=True)
class AuditOp:
    """The audit trail of one memory (or of a tenant when `memory_id` is empty), oldest
    first: its first `limit` entries, or with `newest` its last `limit`."""

    tenant: str
    memory_id: str
    limit: int
    newest: bool = False


Op = (
    ApplyOp
    | LoadOp
    | PoolOp
    | SearchOp
    | ListOp
    | HistoryOp
    | GetOp
    | ReceiptOp
    | EditOp
    | ReviewOp
    | AuditOp
)
WRITE_OPS = (ApplyOp, EditOp, ReviewOp)


@quick_init
@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One recorded change: who, what, when, why. `detail` never holds memory content."""

    at: datetime
    actor: str
    action: str
    memory_id: str | None
    tenant: str
    detail: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "at": self.at.isoformat(),
            "actor": self.actor,
            "action": self.action,
            "memory_id": self.memory_id,
            "tenant": self.tenant,
            "detail": self.detail,
        }


def trail_end(entries: list[AuditEntry], limit: int, newest: bool) -> list[AuditEntry]:
    """The first `limit` of `entries`, or with `newest` the last, as `AuditOp` asks."""
    return entries[max(len(entries) - limit, 0) :] if newest else entries[:limit]


@dataclass(frozen=True, slots=True)
class EditResult:
    """An edit's outcome. On a conflict `after` is None and `current` is what is stored now."""

    applied: bool
    forced: bool
    before: Memory
    current: Memory


class MemoryBackend(abc.ABC):
    """A place memories live. Implement `batch`; never add another abstract method."""

    @abc.abstractmethod
    def batch(self, ops: Sequence[Op]) -> list[Any]:
        """Perform `ops` in order, in one transaction; one result per op."""

    def create_schema(self) -> None:
        """Create whatever storage the backend needs (a no-op where there is none)."""
        return None


class MemoryNotFound(LookupError):
    """No memory with that id is readable by the caller's scope."""


class EditConflict(Exception):
    """The memory changed since the version the edit was based on."""

    def __init__(self, expected: int, current: Memory, proposed: str) -> None:
        super().__init__(
            f"memory {current.id} is at version {current.version}, not {expected}: "
            "re-read it, or pass --force to overwrite"
        )
        self.expected = expected
        self.current = current
        self.proposed = proposed


class ScopeRefused(ValueError):
    """An apply names a scope the store cannot keep (`memory.storable.scope_problems`):
    the whole batch is refused before anything is written."""


class HandleTaken(ValueError):
    """An apply names a receipt handle another tenant's batch already used: the stored
    receipt is not that batch's to return, so nothing is written."""


class EditRefused(ValueError):
    """An operator's edit, review or forget breaks a rule every stored text obeys: its
    content or reason holds a secret or what the store cannot keep; content empty or
    too long."""


class NotPending(ValueError):
    """A review decision on a memory that is not waiting for review."""
