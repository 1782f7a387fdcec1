"""Keys and handles made to fit their columns (`workers.runs.fit`)."""

from __future__ import annotations

import pytest

from memory.records import quote_part
from memory.storable import HANDLE_CHARS
from workers.hooks.write_back import receipt_handle
from workers.runs import RUN_KEY_CHARS, fit, trigger_key
from workers.subagents import child_key


def test_what_fits_is_left_as_it_is() -> None:
    assert fit("write:", "triage/acme/ana@event:42", 64) == "write:triage/acme/ana@event:42"


def test_what_does_not_fit_keeps_its_start_and_a_hash_of_the_whole() -> None:
    long = "triage/acme/*@event:" + "e" * 300
    fitted = fit("", long, RUN_KEY_CHARS)
    assert len(fitted) == RUN_KEY_CHARS
    assert fitted.startswith("triage/acme/*@event:eee") and fitted[-17] == "~"
    assert fit("", long, RUN_KEY_CHARS) == fitted  # the same event, the same run
    assert fit("", long[:-1] + "f", RUN_KEY_CHARS) != fitted


def test_a_receipt_handle_fits_its_column() -> None:
    handle = receipt_handle("write", "x" * 255)
    assert len(handle) == HANDLE_CHARS and handle.startswith("write:xxx")
    assert receipt_handle("write", "short") == "write:short"


def test_a_subagent_of_a_long_run_gets_a_key_that_fits() -> None:
    parent = fit("", "triage/acme/*@event:" + "e" * 300, RUN_KEY_CHARS)
    key = child_key(parent, "research")
    assert len(key) == RUN_KEY_CHARS and key == child_key(parent, "research")
    assert child_key("triage/acme/ana@event:1", "research") == (
        "triage/acme/ana@event:1/sub:research"
    )


def test_a_trigger_key_names_its_scope_and_event_as_before_when_they_are_plain() -> None:
    assert trigger_key("triage", "acme", "ana", "42") == "triage/acme/ana@event:42"
    assert trigger_key("triage", "acme", "", "42") == "triage/acme/*@event:42"
    manual = trigger_key("triage", "acme", "ana")
    assert manual.startswith("triage/acme/ana@manual:") and manual != trigger_key(
        "triage", "acme", "ana"
    )


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (("a", "x/y", "", "1"), ("a", "x", "y/*", "1")),  # a tenant with a slash
        (("a", "x", "", "1"), ("a", "x", "*", "1")),  # no user, and a user named *
        (("a", "x", "u@event:1", "2"), ("a", "x", "u", "1@event:2")),
        (("a/b", "x", "", "1"), ("a", "b/x", "", "1")),
        (("a", "x", "", "1%2F"), ("a", "x", "", "1/")),  # the escape itself is escaped
    ],
)
def test_different_scopes_or_events_never_make_the_same_key(
    one: tuple[str, str, str, str], other: tuple[str, str, str, str]
) -> None:
    assert trigger_key(*one) != trigger_key(*other)


def test_an_event_id_never_makes_the_key_of_another_runs_subagent() -> None:
    parent = trigger_key("triage", "acme", "", "1")
    assert child_key(parent, "research") != trigger_key("triage", "acme", "", "1/sub:research")
    assert child_key(parent, "a/sub:b") != child_key(child_key(parent, "a"), "b")
    assert quote_part("tenant 7 · Żubrówka") == "tenant 7 · Żubrówka"
