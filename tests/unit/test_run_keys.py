"""Keys and handles made to fit their columns (`workers.runs.fit`)."""

from __future__ import annotations

from memory.storable import HANDLE_CHARS
from workers.hooks.write_back import receipt_handle
from workers.runs import RUN_KEY_CHARS, fit
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
