"""The vocabulary of memory: scopes, kinds, sources, candidates and stored memories.

Everything here is a frozen record or an enum; no I/O. The store, the write gate
and the loader all speak in these types, so a caller that builds a `Candidate`
by hand sees exactly what the writer will judge.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memory.quick_init import quick_init

ANY = ""
"""The wildcard in a scope column: `shared` has no agent, `agent` no user, `tenant` neither."""

_PART_ESCAPES = str.maketrans({"%": "%25", "/": "%2F", "*": "%2A", "@": "%40"})
_ESCAPED = re.compile("%(25|2F|2A|40)", re.IGNORECASE)


def quote_part(name: str) -> str:
    """`name` (a tenant, user or agent) as one part of a text that joins such parts:
    a scope's `tenant/user/agent`, with `*` for no user or agent, and a run's key
    (`agent/tenant/user@event:id`, `workers.runs`). Inside a part `%`, `/`, `*` and
    `@` are written `%25`, `%2F`, `%2A` and `%40`, so two different scopes never
    read the same (tenant `x/y` and tenant `x` with user `y`; a user named `*` and
    no user). Names are stored as they are, with those characters: only their text
    form is quoted, and a name without them is left as it is.

        >>> quote_part("ana/ops"), quote_part("Żaneta")
        ('ana%2Fops', 'Żaneta')
    """
    return name.translate(_PART_ESCAPES)


def unquote_part(text: str) -> str:
    """The name `quote_part` wrote as `text`. Only its four escapes are undone: a
    `%` not starting one of them ("50%off", typed as stored) stays as it is."""
    return _ESCAPED.sub(lambda found: chr(int(found.group(1), 16)), text)


class Layer(enum.StrEnum):
    """Which of the four memory layers a scope names, from narrowest to widest."""

    PRIVATE = "private"  # (tenant, user, agent)
    SHARED = "shared"  # (tenant, user, *)
    AGENT = "agent"  # (tenant, *, agent)
    TENANT = "tenant"  # (tenant, *, *)


class Kind(enum.StrEnum):
    FACT = "fact"
    PREFERENCE = "preference"
    INSTRUCTION = "instruction"
    EPISODE = "episode"
    GOAL = "goal"


class Source(enum.StrEnum):
    """Where a candidate's content came from; confidence follows from it."""

    STATED = "stated"  # said by the person the memory is about
    OPERATOR = "operator"
    OBSERVED = "observed"  # seen in a feed, an event or a tool's output
    INFERRED = "inferred"  # concluded by an agent
    SUBAGENT = "subagent"  # reported by a subagent run


SOURCE_CONFIDENCE: Mapping[Source, float] = {
    Source.STATED: 1.0,
    Source.OPERATOR: 0.95,
    Source.OBSERVED: 0.8,
    Source.SUBAGENT: 0.7,
    Source.INFERRED: 0.5,
}


class Status(enum.StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    PENDING_REVIEW = "pending_review"
    REJECTED = "rejected"
    EXPIRED = "expired"


KINDS: Mapping[str, Kind] = {k.value: k for k in Kind}
SOURCES: Mapping[str, Source] = {s.value: s for s in Source}
STATUSES: Mapping[str, Status] = {s.value: s for s in Status}
"""Members by stored value, for the read paths: a dict lookup is a tenth of the cost of
calling the enum, and a load turns dozens of rows into records."""


@quick_init
@dataclass(frozen=True, slots=True)
class Scope:
    """Who a memory belongs to: `(tenant, user, agent)` with `ANY` as the wildcard.

    Example:
        >>> Scope("acme", "ana", "triage").layer
        <Layer.PRIVATE: 'private'>
        >>> [s.layer.value for s in Scope("acme", "ana", "triage").readable()]
        ['private', 'shared', 'agent', 'tenant']
    """

    tenant: str
    user: str = ANY
    agent: str = ANY

    def __post_init__(self) -> None:
        if not self.tenant:
            raise ValueError("a scope needs a tenant")

    @property
    def layer(self) -> Layer:
        if self.user and self.agent:
            return Layer.PRIVATE
        if self.user:
            return Layer.SHARED
        if self.agent:
            return Layer.AGENT
        return Layer.TENANT

    def readable(self) -> tuple[Scope, ...]:
        """This scope and every layer above it: never below, never sideways."""
        out = [self]
        if self.user and self.agent:
            out.append(Scope(self.tenant, self.user, ANY))
        if self.agent and self.user:
            out.append(Scope(self.tenant, ANY, self.agent))
        if self.user or self.agent:
            out.append(Scope(self.tenant))
        return tuple(dict.fromkeys(out))

    def at(self, layer: Layer) -> Scope:
        """The scope of `layer` that this run's scope may reach (e.g. its shared layer)."""
        if layer is Layer.PRIVATE:
            return self
        if layer is Layer.SHARED:
            return Scope(self.tenant, self.user, ANY)
        if layer is Layer.AGENT:
            return Scope(self.tenant, ANY, self.agent)
        return Scope(self.tenant)

    def __str__(self) -> str:
        """`tenant/user/agent`, `*` for no user or agent, each name a `quote_part`:
        the text audit details, exports, forget reports and the CLI show."""
        parts = (self.tenant, self.user, self.agent)
        return "/".join(quote_part(part) if part else "*" for part in parts)

    @classmethod
    def parse(cls, text: str) -> Scope:
        """Parse `tenant/user/agent` with `*` for a wildcard, as `str` writes it (a
        `/`, `*`, `@` or `%` inside a name written `%2F`, `%2A`, `%40`, `%25`)."""
        parts = text.split("/")
        if len(parts) != 3:
            raise ValueError(
                f"scope {text!r} is not tenant/user/agent (use * for any; a / or * inside a"
                " name is written %2F or %2A)"
            )
        tenant, user, agent = (ANY if p == "*" else unquote_part(p) for p in parts)
        return cls(tenant, user, agent)


@dataclass(frozen=True, slots=True)
class Provenance:
    """Where a candidate came from and which run, task and schedule produced it."""

    source: Source
    reference: str = ""  # message id, URL, file:line
    run_id: str = ""
    task_id: str = ""
    agent: str = ""
    subagent: str = ""
    schedule: str = ""
    subject: str = ""  # the person the memory is about, for forgetting by person
    acting_for: str = ""
    """The person the run that proposed it acted for (its user); "" for a run with no
    person (a tenant's cron) and for a write that is not a run's (the operator's CLI).
    Not stored. The memory writer sets it from the run's record, whatever the
    candidate said: the write gate trusts it (`memory.policy`), so an agent cannot."""

    @property
    def confidence(self) -> float:
        return SOURCE_CONFIDENCE[self.source]


@dataclass(frozen=True, slots=True)
class Candidate:
    """Something a run proposes to remember. The writer's gate decides its fate.

    `scope` is where it should live; `key` an optional slot for supersession;
    `idempotency_key` defaults to `task_id:key` or `task_id:content-hash`.
    """

    scope: Scope
    kind: Kind
    content: str
    provenance: Provenance
    key: str = ""
    idempotency_key: str = ""
    valid_to: datetime | None = None
    evidence: str = ""
    subagent_state: str = ""  # for source=subagent: succeeded | failed | cancelled | waiting
    meta: Mapping[str, Any] = field(default_factory=dict)

    def effective_idempotency_key(self) -> str:
        if self.idempotency_key:
            return self.idempotency_key
        slot = self.key or content_hash(self.content)
        return f"{self.provenance.task_id or self.provenance.run_id}:{slot}"

    def replace(self, **changes: Any) -> Candidate:
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe form for a queue message (the writer rebuilds it with from_json).
        The scope travels as its three fields, not as its `tenant/user/agent` text:
        a user named `*` or one holding a `/` would not parse back to itself."""
        return {
            "scope": [self.scope.tenant, self.scope.user, self.scope.agent],
            "kind": self.kind.value,
            "content": self.content,
            "key": self.key,
            "idempotency_key": self.idempotency_key,
            "valid_to": self.valid_to.isoformat() if self.valid_to else None,
            "evidence": self.evidence,
            "subagent_state": self.subagent_state,
            "meta": dict(self.meta),
            "provenance": {
                f.name: getattr(self.provenance, f.name)
                for f in dataclasses.fields(self.provenance)
            },
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Candidate:
        provenance = dict(data["provenance"])
        provenance["source"] = Source(provenance["source"])
        valid_to = data.get("valid_to")
        return cls(
            scope=_scope_from_json(data["scope"]),
            kind=Kind(data["kind"]),
            content=data["content"],
            key=data.get("key", ""),
            idempotency_key=data.get("idempotency_key", ""),
            valid_to=datetime.fromisoformat(valid_to) if valid_to else None,
            evidence=data.get("evidence", ""),
            subagent_state=data.get("subagent_state", ""),
            meta=data.get("meta", {}),
            provenance=Provenance(**provenance),
        )


def _scope_from_json(value: Any) -> Scope:
    """A scope as `Candidate.to_json` writes it; its text form in messages queued by
    an earlier release."""
    if isinstance(value, str):
        return Scope.parse(value)
    tenant, user, agent = value
    return Scope(tenant, user, agent)


@quick_init
@dataclass(frozen=True, slots=True)
class Memory:
    """A stored memory row, as every read path returns it."""

    id: str
    scope: Scope
    kind: Kind
    content: str
    key: str
    status: Status
    source: Source
    confidence: float
    reference: str
    run_id: str
    task_id: str
    agent: str
    subagent: str
    schedule: str
    subject: str
    idempotency_key: str
    version: int
    score: float
    created_at: datetime
    valid_from: datetime
    valid_to: datetime | None
    superseded_at: datetime | None
    supersedes_id: str | None
    superseded_by_id: str | None
    last_reinforced_at: datetime
    last_used_at: datetime | None

    @classmethod
    def from_row(cls, row: Any) -> Memory:
        # Positional, in field order: a frozen record's keyword call costs half as much
        # again, and every read builds these.
        return cls(
            row["id"],
            Scope(row["tenant"], row["user_id"], row["agent_id"]),
            KINDS[row["kind"]],
            row["content"],
            row["key"],
            STATUSES[row["status"]],
            SOURCES[row["source"]],
            row["confidence"],
            row["reference"],
            row["run_id"],
            row["task_id"],
            row["agent"],
            row["subagent"],
            row["schedule"],
            row["subject"],
            row["idempotency_key"],
            row["version"],
            row["score"],
            row["created_at"],
            row["valid_from"],
            row["valid_to"],
            row["superseded_at"],
            row["supersedes_id"],
            row["superseded_by_id"],
            row["last_reinforced_at"],
            row["last_used_at"],
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, Scope):
                value = str(value)
            elif isinstance(value, enum.Enum):
                value = value.value
            out[f.name] = value
        return out


@functools.lru_cache(maxsize=4096)
def content_hash(content: str) -> str:
    """A short stable hash of content normalised for case and white space.

    Cached: the writer hashes each candidate's text as it judges it and again as it
    sends the row, and each slot's active value at every supersession."""
    normal = " ".join(content.lower().split())
    return hashlib.sha256(normal.encode()).hexdigest()[:16]
