"""Who asks to forget and what: the requester, the selector, and the rows each reaches.

Only the person a memory is about and the operator may make memory forget
(`memory.forgetting` refuses everyone else). A selector names what to forget
within one tenant; `Selector.where` is its clause and `allowed` the requester's,
both over `ns_memories`. A person and a text are found in every spelling that
reads the same (`memory.folding.unconfused`): "Ana", "ana ", "Ａｎａ" and "Аna" with
a Cyrillic А are one person, whether they ask to forget or are forgotten.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, literal, not_, or_

from memory.dialect import holds
from memory.folding import folded, unaccent, unconfuse, unconfused
from memory.records import Scope, Source
from memory.tables import memories


class Role(enum.StrEnum):
    PERSON = "person"
    OPERATOR = "operator"
    AGENT = "agent"
    MAINTENANCE = "maintenance"  # purge of expired rows


class SelectorKind(enum.StrEnum):
    SUBJECT = "subject"
    SCOPE = "scope"
    RUN = "run"
    SOURCE = "source"
    ID = "id"
    TEXT = "text"
    PURGE = "purge"


@dataclass(frozen=True, slots=True)
class Requester:
    role: Role
    name: str

    @classmethod
    def person(cls, name: str) -> Requester:
        return cls(Role.PERSON, name)

    @classmethod
    def operator(cls, name: str = "operator") -> Requester:
        return cls(Role.OPERATOR, name)

    @classmethod
    def agent(cls, name: str) -> Requester:
        return cls(Role.AGENT, name)

    @property
    def actor(self) -> str:
        return f"{self.role.value}:{self.name}"


@dataclass(frozen=True, slots=True)
class Selector:
    """What to forget, within one tenant. Build with the `by_*` constructors."""

    tenant: str
    kind: SelectorKind
    value: str = ""
    scope: Scope | None = None
    ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.tenant:
            raise ValueError("a forget needs a tenant")
        # Counted as read (`memory.folding`): invisible characters and white space
        # alone would match every row.
        if self.kind is SelectorKind.TEXT and len(folded(self.value)) < 3:
            raise ValueError("a text match needs at least 3 characters")
        if self.kind is SelectorKind.SUBJECT and not folded(self.value):
            raise ValueError("forget by subject needs a value")
        if self.kind is SelectorKind.RUN and not self.value:
            raise ValueError("forget by run needs a value")
        if self.kind is SelectorKind.SOURCE:
            Source(self.value)  # raises ValueError naming the bad source
        if self.kind is SelectorKind.ID and not self.ids:
            raise ValueError("forget by id needs at least one id")
        if self.kind is SelectorKind.SCOPE and (
            self.scope is None or self.scope.tenant != self.tenant
        ):
            raise ValueError("forget by scope needs a scope in the same tenant")

    @classmethod
    def by_subject(cls, tenant: str, person: str) -> Selector:
        return cls(tenant, SelectorKind.SUBJECT, person)

    @classmethod
    def by_scope(cls, scope: Scope) -> Selector:
        return cls(scope.tenant, SelectorKind.SCOPE, scope=scope)

    @classmethod
    def by_run(cls, tenant: str, run_id: str) -> Selector:
        return cls(tenant, SelectorKind.RUN, run_id)

    @classmethod
    def by_source(cls, tenant: str, source: str) -> Selector:
        return cls(tenant, SelectorKind.SOURCE, source)

    @classmethod
    def by_ids(cls, tenant: str, ids: Iterable[str]) -> Selector:
        return cls(tenant, SelectorKind.ID, ids=tuple(ids))

    @classmethod
    def by_text(cls, tenant: str, text: str) -> Selector:
        return cls(tenant, SelectorKind.TEXT, text)

    def where(self) -> ColumnElement[bool]:
        c = memories.c
        match self.kind:
            case SelectorKind.SUBJECT:
                clause = about(self.value)
            case SelectorKind.SCOPE:
                assert self.scope is not None
                clause = and_(c.user_id == self.scope.user, c.agent_id == self.scope.agent)
            case SelectorKind.RUN:
                clause = or_(c.run_id == self.value, c.task_id == self.value)
            case SelectorKind.SOURCE:
                clause = c.source == self.value
            case SelectorKind.ID:
                clause = c.id.in_(self.ids)
            case SelectorKind.TEXT:
                clause = holds(unconfuse(c.content), unconfuse(literal(self.value)))
            case _:
                raise ValueError(f"selector {self.kind} has no clause")
        return and_(c.tenant == self.tenant, clause)

    def lookalike(self) -> ColumnElement[bool] | None:
        """For a text, the rows that hold it only with other accents or letter forms
        ("Lukasz" or full-width "Ｌｕｋａｓｚ" for "Łukasz"), which `where` leaves: they
        may be about someone else, so a forget does not delete them, and its report
        does not call itself exhaustive while they remain. None for other kinds."""
        if self.kind is not SelectorKind.TEXT:
            return None
        c = memories.c
        spelled_so = holds(unaccent(c.content), unaccent(literal(self.value)))
        return and_(c.tenant == self.tenant, spelled_so, not_(self.where()))

    def names_someone_else(self, person: str) -> bool:
        """A forget by subject whose name does not read as `person`'s
        (`memory.folding.unconfused`): a person may not ask for it, whether or not
        anything about that name is stored (so asking tells them nothing)."""
        return self.kind is SelectorKind.SUBJECT and unconfused(self.value) != unconfused(person)

    def describe(self) -> dict[str, Any]:
        """For audit and tombstones: the kind, and the value unless it is text."""
        out: dict[str, Any] = {"by": self.kind.value}
        if self.kind in (SelectorKind.SUBJECT, SelectorKind.RUN, SelectorKind.SOURCE):
            out["value"] = self.value
        elif self.kind is SelectorKind.SCOPE:
            out["scope"] = str(self.scope)
        elif self.kind is SelectorKind.ID:
            out["ids"] = len(self.ids)
        return out


def allowed(requester: Requester) -> ColumnElement[bool]:
    """The rows `requester` may make forget: all for the operator, for a person only
    those about them (`about`)."""
    if requester.role is Role.OPERATOR:
        return literal(True)
    return about(requester.name)


def about(person: str) -> ColumnElement[bool]:
    """Rows about `person`: their subject names that person, or they name no one and
    belong to the person's own scope. Names compare as read (`memory.folding`):
    "Ana", "ana " and "Ａｎａ" are one person, whether they ask to forget or are
    forgotten, and the re-count that proves a forget asks the same way. Letters of
    other scripts that pass for Latin ones read as those ("Аna" with a Cyrillic А)."""
    c = memories.c
    person_name, subject = unconfuse(literal(person)), unconfuse(c.subject)
    return or_(subject == person_name, and_(subject == "", unconfuse(c.user_id) == person_name))
