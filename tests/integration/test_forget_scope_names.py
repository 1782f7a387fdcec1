"""Scopes whose names hold `/`, `*`, `@` or `%` are written as one text without
ambiguity (`memory.records.quote_part`), so what `memory show`, the audit trail and a
forget report name is one scope, and `forget --scope` reaches it: rows stored
under such names stay readable and forgettable. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import Engine

from memory.records import ANY, Scope, Source
from memory.store import Store
from tests.integration.test_maintenance_support import candidate, nightshift

pytestmark = pytest.mark.integration

SLASHED = Scope("acme", "ana/ops", "triage")
STARRED = Scope("acme", "*", "triage")  # a user named "*"
AGENT_LAYER = Scope("acme", ANY, "triage")


def seed(store: Store) -> None:
    store.apply(
        [
            candidate("the ops pager is 4471", scope=SLASHED, source=Source.STATED),
            candidate("the star desk is B2", scope=STARRED, source=Source.STATED),
            candidate("triage closes at 9", scope=AGENT_LAYER, source=Source.OPERATOR),
        ],
        handle="h",
        actor="writer",
    )


def run(engine: Engine, *args: str) -> Any:
    done = nightshift(engine, "memory", *args, "--json")
    assert done.exit_code == 0, done.output
    return json.loads(done.output)


def shown(engine: Engine, scope: Scope) -> list[tuple[str, str]]:
    flags = ["--tenant", scope.tenant, "--user", scope.user, "--agent", scope.agent]
    return sorted((m["scope"], m["content"]) for m in run(engine, "show", *flags))


def test_a_scope_with_a_slash_or_a_star_in_a_name_is_shown_as_one_scope(store: Store) -> None:
    seed(store)

    assert shown(store.engine, SLASHED) == [
        ("acme/*/triage", "triage closes at 9"),
        ("acme/ana%2Fops/triage", "the ops pager is 4471"),
    ]
    assert shown(store.engine, STARRED) == [
        ("acme/%2A/triage", "the star desk is B2"),
        ("acme/*/triage", "triage closes at 9"),
    ]
    written = [e.detail["scope"] for e in store.audit("acme")]
    assert sorted(written) == ["acme/%2A/triage", "acme/*/triage", "acme/ana%2Fops/triage"]


def test_forget_by_scope_reaches_a_scope_with_a_slash_or_a_star_in_a_name(store: Store) -> None:
    seed(store)

    slashed = run(store.engine, "forget", "--tenant", "acme", "--scope", "acme/ana%2Fops/triage")
    starred = run(store.engine, "forget", "--tenant", "acme", "--scope", "acme/%2A/triage")

    assert (slashed["deleted"], slashed["selector"]) == (
        1,
        {"by": "scope", "scope": "acme/ana%2Fops/triage"},
    )
    assert (starred["deleted"], starred["selector"]["scope"]) == (1, "acme/%2A/triage")
    assert shown(store.engine, SLASHED) == [("acme/*/triage", "triage closes at 9")]
    assert shown(store.engine, STARRED) == [("acme/*/triage", "triage closes at 9")]
