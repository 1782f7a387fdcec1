"""Forgetting finds a person or a text in every spelling a reader takes for the same:
other case, surrounding white space, invisible characters, full-width and
decomposed (NFD) Unicode forms. On SQLite and PostgreSQL, through the command
line, and the re-count that proves a forget counts them too."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest
from sqlalchemy import Engine, literal, select

from memory.folding import fold, folded, unaccent, unaccented
from memory.records import Source
from memory.store import Store
from tests.clock import Clock
from tests.integration.test_maintenance_support import (
    ANA,
    BOB,
    candidate,
    insert_as_stored_before,
    nightshift,
)

pytestmark = pytest.mark.integration


def forget(engine: Engine, *args: str) -> dict[str, Any]:
    done = nightshift(engine, "memory", "forget", "--tenant", "acme", *args, "--json")
    assert done.exit_code == 0, done.output
    report: dict[str, Any] = json.loads(done.output)
    return report


def shown(engine: Engine, user: str) -> list[str]:
    """What `memory show --all` lists for acme/USER/triage."""
    flags = ["--tenant", "acme", "--user", user, "--agent", "triage", "--all", "--json"]
    done = nightshift(engine, "memory", "show", *flags)
    assert done.exit_code == 0, done.output
    return sorted(m["content"] for m in json.loads(done.output))


def test_forgetting_a_person_finds_every_spelling_of_their_name(store: Store, clock: Clock) -> None:
    store.apply(
        [
            candidate("Ana's blood type is AB-", subject="Ana", source=Source.STATED),
            candidate("Ana's passport expires 2029", subject="ana ", source=Source.STATED),
            candidate("Ana's locker is 12", subject="ＡＮＡ\u200b"),  # full width, zero width
            candidate("Bob owes Ana lunch", scope=BOB, subject="Ana"),
            candidate("Bob's badge is 9911", scope=BOB),
            candidate("Carl covers Ana's shift", subject="carl"),
        ],
        handle="h",
        actor="writer",
    )
    # The writer stores a subject in one spelling; case is the person's own.
    assert sorted(m.subject for m in store.show(ANA)) == ["ANA", "Ana", "ana", "carl"]
    with store.engine.begin() as conn:  # as an earlier release stored them
        insert_as_stored_before(
            conn, "Ana's pager is 4471", user="ana", subject="  aNA\t", now=clock()
        )
        insert_as_stored_before(
            conn, "Ana's desk is B2", user="bob", subject="A\u00adna", now=clock()
        )
        insert_as_stored_before(conn, "Ana parks at P3", user="ＡＮＡ", subject="", now=clock())

    report = forget(store.engine, "--subject", " ANA", "--as", "person:ana")

    assert (report["deleted"], report["remaining"], report["exhaustive"]) == (7, 0, True)
    assert shown(store.engine, "ana") == ["Carl covers Ana's shift"]
    assert shown(store.engine, "bob") == ["Bob's badge is 9911"]
    assert shown(store.engine, "ＡＮＡ") == []


def test_the_recount_counts_the_spellings_a_pass_did_not_reach(store: Store, clock: Clock) -> None:
    with store.engine.begin() as conn:
        for number, subject in enumerate(("Ana", "ana ", "ＡＮＡ")):
            insert_as_stored_before(
                conn, f"{number} is a number Ana likes", user="ana", subject=subject, now=clock()
            )

    first = forget(store.engine, "--subject", "ana", "--as", "person:ana", "--limit", "1")

    assert (first["deleted"], first["remaining"], first["exhaustive"]) == (1, 2, False)
    second = forget(store.engine, "--subject", "ana", "--as", "person:ana")
    assert (second["deleted"], second["remaining"], second["exhaustive"]) == (2, 0, True)
    assert shown(store.engine, "ana") == []


def test_forgetting_a_text_finds_its_other_unicode_forms(store: Store, clock: Clock) -> None:
    name = "Łukasz Żółw"
    store.apply(
        [
            candidate(f"{unicodedata.normalize('NFD', name)} called about the lease"),
            candidate("ŁUKASZ\u00a0ŻÓŁW asked for a refund"),  # no-break space
            candidate("Łukasz\u200b  Żółw\nis on leave"),  # zero width, two spaces
            candidate("Ｌｕｋａｓｚ Żółw from accounts"),  # full width: it reads "Lukasz"
            candidate("code A_B7 opens the door"),
            candidate("code AxB7 opens the gate"),
        ],
        handle="h",
        actor="writer",
    )

    by_name = forget(store.engine, "--text", "łukasz żółw")

    assert (by_name["deleted"], by_name["remaining"], by_name["exhaustive"]) == (3, 0, False)
    assert by_name["reason"].startswith("1 memories hold the text with other accents or letter")
    by_spelling = forget(store.engine, "--text", "lukasz żółw")
    by_code = forget(store.engine, "--text", "a_b7")  # "_" is no wildcard
    for report in (by_spelling, by_code):
        assert (report["deleted"], report["remaining"], report["exhaustive"]) == (1, 0, True)
    assert shown(store.engine, "ana") == ["code AxB7 opens the gate"]


def test_the_database_folds_as_python_does(store: Store) -> None:
    """`ns_fold` and `ns_unaccent` are Python functions on SQLite, SQL on PostgreSQL."""
    texts = [
        "Ana",
        " ana\t",
        "ＡＮＡ\u200b",
        "A\u00adna",
        unicodedata.normalize("NFD", "Łukasz  Żółw"),
        "ŁUKASZ\u00a0ŻÓŁW\u2028",
        "ﬁle\u3000name",
        "50%_off",
    ]
    with store.engine.connect() as conn:
        in_database = [
            tuple(conn.execute(select(fold(literal(t)), unaccent(literal(t)))).one()) for t in texts
        ]
    assert in_database == [(folded(t), unaccented(t)) for t in texts]
    assert {f for f, _ in in_database[:4]} == {"ana"}
    assert in_database[4] == in_database[5] == ("łukasz żółw", "lukasz zolw")


def test_the_json_report_says_why_the_forget_was_asked(store: Store) -> None:
    """`reason` says why a report is partial; the requester's own is `requested_reason`."""
    asked = forget(store.engine, "--subject", "ana", "--reason", "asked on the phone")
    assert asked["requested_reason"] == "asked on the phone"
    assert (asked["exhaustive"], asked["reason"]) == (True, "")
