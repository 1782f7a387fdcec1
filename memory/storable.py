"""What the store can keep: text without NUL characters or lone surrogates, each
field no longer than its column, times with their time zone; and scopes without
a secret in them.

PostgreSQL's `text` cannot hold a NUL, no encoder turns a lone surrogate into
UTF-8 (and JSON decoders let `"\\ud800"` through, so an event payload can carry
one), a `varchar(n)` refuses n + 1 characters, and a time without a zone names
no instant (`memory.tables.utc` refuses it). Sent to the database, any of these
fails the apply's one statement and with it every candidate of the batch; found
here, the gate refuses the one candidate (`memory.policy`), and a scope the store
cannot address refuses its batch before anything is written (`memory.writing`).
SQLite and the in-memory store would have kept most of them: checking here keeps
the backends alike.
"""

from __future__ import annotations

import operator

from sqlalchemy import Table

from memory.records import Candidate, Scope
from memory.secrets import find_secrets_as_read
from memory.tables import audit, memories, receipts


def _length(column: str, table: Table = memories) -> int:
    length: int = table.c[column].type.length  # type: ignore[attr-defined]
    return length


COLUMN_LIMITS = {
    field: _length(field.removeprefix("provenance."))
    for field in (
        "idempotency_key",
        "provenance.run_id",
        "provenance.task_id",
        "provenance.agent",
        "provenance.subagent",
        "provenance.schedule",
        "provenance.subject",
    )
}
"""The longest text each bounded field's column holds, read off `memory.tables`."""

COLUMN_FIELDS = ("content", "key", "evidence", "provenance.reference", *COLUMN_LIMITS)
"""A candidate's texts that land in a column of the store: the unbounded first, then
the bounded (content and key are also bounded by the gate's own rule, `GateConfig`)."""
_COLUMN_VALUES = operator.attrgetter(*COLUMN_FIELDS)
_FIRST_LIMITED = len(COLUMN_FIELDS) - len(COLUMN_LIMITS)
_SHORTEST_LIMIT = min(COLUMN_LIMITS.values())

SCOPE_LIMITS = {
    "tenant": _length("tenant"),
    "user": _length("user_id"),
    "agent": _length("agent_id"),
}
"""The longest tenant, user and agent the store holds."""


def unstorable(text: str) -> str:
    """What in `text` no backend can keep ("a NUL character", "a lone surrogate
    (not UTF-8)"), or "" when it can be kept."""
    if "\x00" in text:
        return "a NUL character"
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            return "a lone surrogate (not UTF-8)"
    return ""


def unstorable_fields(candidate: Candidate) -> list[str]:
    """What in the candidate's stored fields the store cannot keep, one phrase per
    problem naming the field, never quoting it; empty when all can be kept."""
    values = _COLUMN_VALUES(candidate)
    problems = []
    if max(map(len, values[_FIRST_LIMITED:])) > _SHORTEST_LIMIT:  # rare: look closer
        problems = [
            f"{name} has {len(value)} characters, more than {limit}"
            for (name, limit), value in zip(
                COLUMN_LIMITS.items(), values[_FIRST_LIMITED:], strict=True
            )
            if len(value) > limit
        ]
    if candidate.valid_to is not None and candidate.valid_to.utcoffset() is None:
        problems.append("valid_to has no time zone")
    if unstorable("\n".join(values)):  # the common case: one scan finds nothing
        problems += [
            f"{name} holds {what}"
            for name, value in zip(COLUMN_FIELDS, values, strict=True)
            if (what := unstorable(value))
        ]
    return problems


HANDLE_CHARS = _length("handle", receipts)
"""The longest receipt handle the store holds."""
ACTOR_CHARS = _length("actor", audit)
"""The longest actor (who made a change) the audit trail holds."""


def text_problems(name: str, value: str, limit: int) -> list[str]:
    """What in the text `value` (called `name`) the store cannot keep, never quoting it."""
    problems = []
    if len(value) > limit:
        problems.append(f"{name} has {len(value)} characters, more than {limit}")
    if what := unstorable(value):
        problems.append(f"{name} holds {what}")
    return problems


def scope_part_problems(part: str, value: str) -> list[str]:
    """What in the scope part `part` (tenant, user, agent) the store cannot keep, never
    quoting it. A scope is written beside every row, audit entry and receipt of its
    memory, and no rule that judges content could take a secret out of those: a
    scope that holds one is refused whole, and its text withheld."""
    problems = text_problems(f"scope {part}", value, SCOPE_LIMITS[part])
    if kinds := sorted({f.kind for f in find_secrets_as_read(value)}):
        problems.append(
            f"scope {part} holds a secret ({', '.join(kinds)}), withheld here;"
            " secrets are never stored"
        )
    return problems


def scope_problems(scope: Scope) -> list[str]:
    """What in `scope` the store cannot keep, as `scope_part_problems` says it."""
    return [
        problem
        for part, value in zip(SCOPE_LIMITS, (scope.tenant, scope.user, scope.agent), strict=True)
        for problem in scope_part_problems(part, value)
    ]


def made_storable(text: str) -> str:
    """`text` with what no backend can keep (`unstorable`) written as its Python escape:
    a NUL as `\\x00`, a lone surrogate as `\\ud800`. For text that must be kept whatever
    it holds, such as a run's summary and error (`workers.runs.finish`): refusing it
    would lose the run's outcome."""
    if not unstorable(text):
        return text
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode()
