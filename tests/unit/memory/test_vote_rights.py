"""Who may vote on what (`memory.vote_rights`): a pure rule, no I/O."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory.records import Source
from memory.vote_rights import Fate, judge, shown_id

GIVEN = frozenset({"m-observed", "m-stated", "m-operator", "m-gone"})
SOURCE = {
    "m-observed": Source.OBSERVED,
    "m-stated": Source.STATED,
    "m-operator": Source.OPERATOR,
    "m-elsewhere": Source.STATED,  # exists, in the voter's tenant, but not given to the run
}


def run_vote(memory_id: str, direction: str) -> tuple[Fate, str]:
    verdict = judge(memory_id, direction, SOURCE.get(memory_id), given=GIVEN)
    return verdict.fate, verdict.reason


def operator_vote(memory_id: str, direction: str) -> Fate:
    return judge(memory_id, direction, SOURCE.get(memory_id), given=None).fate


@pytest.mark.parametrize(
    ("memory_id", "direction", "fate", "says"),
    [
        ("m-observed", "up", Fate.COUNTS, ""),
        ("m-observed", "down", Fate.COUNTS, ""),
        ("m-stated", "up", Fate.COUNTS, ""),  # checked the person's word: keep it loaded
        ("m-stated", "down", Fate.REFUSED, "the person's word (source stated)"),
        ("m-operator", "down", Fate.REFUSED, "the operator's word (source operator)"),
        ("m-gone", "down", Fate.UNKNOWN, ""),  # given, since superseded or expired
        ("m-elsewhere", "down", Fate.REFUSED, "was not given to this run"),
        ("victim-tenant-id", "down", Fate.REFUSED, "was not given to this run"),
    ],
)
def test_a_run_votes_only_on_what_it_was_given_and_never_down_on_a_persons_word(
    memory_id: str, direction: str, fate: Fate, says: str
) -> None:
    got, reason = run_vote(memory_id, direction)
    assert got is fate and says in reason


def test_the_operator_votes_on_anything_in_its_tenant_the_persons_word_included() -> None:
    assert operator_vote("m-stated", "down") is Fate.COUNTS
    assert operator_vote("m-elsewhere", "down") is Fate.COUNTS
    assert operator_vote("m-gone", "down") is Fate.UNKNOWN  # not active in that tenant


def test_a_refusal_says_the_same_whether_or_not_the_memory_exists_elsewhere() -> None:
    # A run cannot use refusals to learn what another scope holds.
    assert run_vote("m-elsewhere", "down")[1].replace("m-elsewhere", "X") == run_vote(
        "nothing-here", "down"
    )[1].replace("nothing-here", "X")


@settings(max_examples=200, database=None)
@given(memory_id=st.text(max_size=80))
def test_a_reason_names_an_id_only_when_it_is_shaped_like_one(memory_id: str) -> None:
    reason = run_vote(memory_id, "down")[1]
    shown = shown_id(memory_id)
    assert f"memory {shown} was not given" in reason
    assert shown in (memory_id, "(not an id)")


def test_shown_id_keeps_memory_ids_and_hides_anything_else() -> None:
    assert (
        shown_id("0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b") == "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b"
    )
    assert shown_id("password is hunter2, send it") == "(not an id)"
    assert shown_id("x" * 37) == "(not an id)"
