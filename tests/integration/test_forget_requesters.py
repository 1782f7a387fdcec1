"""A person may forget only what is about them, and learns nothing from a forget
about anyone else's memories: what matches only other people's memories is
answered as what matches nothing, exit code and output alike. On SQLite and
PostgreSQL, through the command line."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from click.testing import Result
from sqlalchemy import Engine

from memory.records import Source
from memory.store import Store
from tests.integration.test_maintenance_support import ANA, BOB, candidate, nightshift

pytestmark = pytest.mark.integration


def forget_as_ana(engine: Engine, *args: str) -> Result:
    return nightshift(engine, "memory", "forget", "--tenant", "acme", "--as", "person:ana", *args)


def answer(result: Result, asked: str = "") -> tuple[int, str]:
    """The exit code and the output, less the tombstone's id (new for each forget) and
    the selector as it was `asked` (the report repeats a run's or a source's name)."""
    output = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}", "<tombstone>", result.output)
    return result.exit_code, output.replace(f'"{asked}"', '"<asked>"') if asked else output


def seed(store: Store, *, about_ana_in_bobs_scope: bool = False) -> dict[str, str]:
    """Ana's memory and Bob's (with one of his about Ana, if asked); ids by content."""
    about_ana = [candidate("Bob lent Ana his locker key", scope=BOB, run="r2", subject="ana")]
    store.apply(
        [
            candidate("Ana's locker is 12", source=Source.STATED, run="r1"),
            candidate("Bob's locker is 7", scope=BOB, run="r1"),
            candidate("Bob's diagnosis is flu", scope=BOB, run="r2"),
            *(about_ana if about_ana_in_bobs_scope else []),
        ],
        handle="h",
        actor="writer",
    )
    return {m.content: m.id for scope in (ANA, BOB) for m in store.show(scope)}


@pytest.mark.parametrize("as_json", [False, True])
@pytest.mark.parametrize(
    ("option", "bobs", "unmatched"),
    [
        ("--text", "diagnosis is flu", "no such words"),
        ("--run", "r2", "r9"),
        ("--source", "observed", "subagent"),
    ],
)
def test_what_matches_only_others_memories_is_answered_as_what_matches_nothing(
    store: Store, option: str, bobs: str, unmatched: str, as_json: bool
) -> None:
    seed(store)
    json_flag = ("--json",) if as_json else ()

    others = forget_as_ana(store.engine, option, bobs, *json_flag)
    nothing = forget_as_ana(store.engine, option, unmatched, *json_flag)

    assert answer(others, bobs) == answer(nothing, unmatched)
    assert others.exit_code == 0, others.output
    assert sorted(m.content for m in store.show(BOB)) == [
        "Bob's diagnosis is flu",
        "Bob's locker is 7",
    ]


def test_a_memory_of_someone_else_by_id_is_answered_as_no_such_memory(store: Store) -> None:
    ids = seed(store)

    bobs = forget_as_ana(store.engine, "--id", ids["Bob's diagnosis is flu"], "--json")
    unknown = forget_as_ana(store.engine, "--id", "00000000-0000-0000-0000-000000000000", "--json")

    assert answer(bobs) == answer(unknown)
    assert bobs.exit_code == 0, bobs.output
    assert len(store.show(BOB)) == 2


def test_a_persons_report_counts_only_their_own_memories(store: Store) -> None:
    seed(store, about_ana_in_bobs_scope=True)

    done = forget_as_ana(store.engine, "--text", "locker", "--json")

    assert done.exit_code == 0, done.output
    report: dict[str, Any] = json.loads(done.output)
    # Ana's locker and Bob's note about her; Bob's own locker is neither scanned nor skipped.
    assert (report["scanned"], report["skipped"], report["deleted"]) == (2, 0, 2)
    assert (report["remaining"], report["exhaustive"]) == (0, True)
    assert sorted(m.content for m in store.show(BOB)) == [
        "Bob's diagnosis is flu",
        "Bob's locker is 7",
    ]


def test_forgetting_someone_else_by_name_is_refused_whatever_is_stored(store: Store) -> None:
    """The refusal follows from the request alone: about Bob, stored or not."""
    seed(store)

    bob = forget_as_ana(store.engine, "--subject", "bob")
    carl = forget_as_ana(store.engine, "--subject", "carl")

    assert bob.exit_code == carl.exit_code == 1
    assert bob.output.replace("'bob'", "'carl'") == carl.output
    assert "may forget only memory about 'ana'" in bob.output
    assert len(store.show(BOB)) == 2
