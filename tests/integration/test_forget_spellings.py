"""Forgetting finds a person or a text in every spelling a reader takes for the same:
other case, surrounding white space, invisible characters, full-width and
decomposed (NFD) Unicode forms, Cyrillic and Greek letters that pass for Latin ones. On SQLite and PostgreSQL, through the command
line, and the re-count that proves a forget counts them too."""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import pytest
from sqlalchemy import Engine, literal, select

from memory.folding import fold, folded, unaccent, unaccented, unconfuse, unconfused
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
    assert by_name["reason"].startswith("1 memory holds the text with other accents or letter")
    by_spelling = forget(store.engine, "--text", "lukasz żółw")
    by_code = forget(store.engine, "--text", "a_b7")  # "_" is no wildcard
    for report in (by_spelling, by_code):
        assert (report["deleted"], report["remaining"], report["exhaustive"]) == (1, 0, True)
    assert shown(store.engine, "ana") == ["code AxB7 opens the gate"]


def test_the_database_folds_as_python_does(store: Store) -> None:
    """`ns_fold`, `ns_unconfuse` and `ns_unaccent` are Python functions on SQLite, SQL
    on PostgreSQL."""
    texts = [
        "Ana",
        " ana\t",
        "ＡＮＡ\u200b",
        "A\u00adna",
        unicodedata.normalize("NFD", "Łukasz  Żółw"),
        "ŁUKASZ\u00a0ŻÓŁW\u2028",
        "ﬁle\u3000name",
        "50%_off",
        "\u0410na \u0420\u0435trova",  # Cyrillic А, Р, е
        "\u0391NA\u200b ＰＥＴＲＯＶＡ",  # Greek Α
        "Анна Петрова",
    ]
    with store.engine.connect() as conn:
        in_database = [
            tuple(
                conn.execute(
                    select(fold(literal(t)), unconfuse(literal(t)), unaccent(literal(t)))
                ).one()
            )
            for t in texts
        ]
    assert in_database == [(folded(t), unconfused(t), unaccented(t)) for t in texts]
    assert {f for f, _, _ in in_database[:4]} == {"ana"}
    assert in_database[4] == in_database[5] == ("łukasz żółw", "łukasz żółw", "lukasz zolw")
    assert {u for _, u, _ in in_database[8:10]} == {"ana petrova"}
    assert in_database[10][1] == "aннa пeтpoвa"  # only the letters that pass for Latin


def test_the_json_report_says_why_the_forget_was_asked(store: Store) -> None:
    """`reason` says why a report is partial; the requester's own is `requested_reason`."""
    asked = forget(store.engine, "--subject", "ana", "--reason", "asked on the phone")
    assert asked["requested_reason"] == "asked on the phone"
    assert (asked["exhaustive"], asked["reason"]) == (True, "")


def test_forgetting_a_person_finds_their_name_in_look_alike_letters(
    store: Store, clock: Clock
) -> None:
    store.apply(
        [
            candidate("Her blood type is AB-", subject="Ana Petrova", source=Source.STATED),
            candidate("Her locker is 12", subject="\u0410na Petrova"),  # Cyrillic А
            candidate("Her desk is B2", subject="Ana \u0420\u0435trova"),  # Cyrillic Р, е
            # Cyrillic А, a zero-width space and a full-width Ｐ in one name
            candidate("Her pager is 4471", subject="\u0410na\u200b \uff30etrova"),
            candidate("Anna's badge is 9911", subject="Anna Petrova"),
            candidate("Анна parks at P3", subject="Анна Петрова"),
        ],
        handle="h",
        actor="writer",
    )
    with store.engine.begin() as conn:  # as an earlier release stored it
        insert_as_stored_before(
            conn, "Her shift ends at 6", user="ana", subject="\u0391NA PETROVA", now=clock()
        )  # Greek Α

    report = forget(store.engine, "--subject", "Ana Petrova", "--as", "person:Ana Petrova")

    assert (report["deleted"], report["remaining"], report["exhaustive"]) == (5, 0, True)
    assert shown(store.engine, "ana") == ["Anna's badge is 9911", "Анна parks at P3"]


LOOK_ALIKES = [
    "\u0410na Petrova asked for a refund",  # Cyrillic А
    "\u0410n\u0430 \u0420\u0435tr\u043ev\u0430 is on leave",  # six Cyrillic letters
    "Ana Pe\u200btrova\u00a0called",  # a zero-width space inside, a no-break space
    "\uff21na \u0420\uff45trova from accounts",  # full-width Ａ and ｅ, Cyrillic Р
    "\u0391NA PETROVA signed",  # Greek Α
]


def test_forgetting_a_text_finds_it_in_look_alike_letters(store: Store) -> None:
    store.apply(
        [
            candidate("Ana Petrova called about the lease"),
            *(candidate(text) for text in LOOK_ALIKES),
            candidate("Anna Petrova is someone else"),
            candidate("Анна Петрова is someone else too"),
        ],
        handle="h",
        actor="writer",
    )

    report = forget(store.engine, "--text", "Ana Petrova")

    assert (report["deleted"], report["remaining"], report["exhaustive"]) == (6, 0, True)
    assert shown(store.engine, "ana") == [
        "Anna Petrova is someone else",
        "Анна Петрова is someone else too",
    ]


def test_the_recount_reads_look_alike_letters_as_the_forget_does(store: Store) -> None:
    """A pass that stops at its limit leaves look-alike copies: the re-count finds them,
    so the report is partial, not a success with a copy left behind."""
    store.apply([candidate(text) for text in LOOK_ALIKES], handle="h", actor="writer")

    first = forget(store.engine, "--text", "ana petrova", "--limit", "1")

    assert (first["deleted"], first["remaining"], first["exhaustive"]) == (1, 4, False)
    second = forget(store.engine, "--text", "ana petrova")
    assert (second["deleted"], second["remaining"], second["exhaustive"]) == (4, 0, True)
    assert shown(store.engine, "ana") == []
