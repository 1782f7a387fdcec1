"""One spelling for what reads the same: the rule forgetting compares names and text by."""

from __future__ import annotations

import unicodedata

import pytest

from memory.folding import folded, folded_key, spelled, unaccented, unconfused
from memory.forgetting import Selector
from memory.policy import Action, AgentRules, judge
from memory.records import Candidate, Kind, Provenance, Scope, Source
from memory.writing import stored_subject


@pytest.mark.parametrize(
    ("text", "read"),
    [
        ("Ana", "Ana"),
        ("  Ana \t", "Ana"),
        ("ＡＮＡ", "ANA"),
        ("A\u00adn\u200ba\ufeff", "Ana"),
        ("Ana\u00a0\u2003Maria", "Ana Maria"),
        (unicodedata.normalize("NFD", "Łukasz Żółw"), "Łukasz Żółw"),
        ("ﬁle", "file"),
    ],
)
def test_a_text_is_spelled_as_it_reads_and_folded_without_case(text: str, read: str) -> None:
    assert spelled(text) == read
    assert folded(text) == read.lower()


@pytest.mark.parametrize(
    "text",
    [
        "Ana Petrova",
        "\u0410na Petrova",  # Cyrillic А
        "\u0410n\u0430 \u0420\u0435tr\u043ev\u0430",  # six Cyrillic letters
        "\u0391NA PETROVA",  # Greek Α
        "\u0410na\u200b \uff30etrova",  # Cyrillic А, zero width, full-width Ｐ
    ],
)
def test_a_forget_reads_look_alike_letters_of_other_scripts_as_latin(text: str) -> None:
    assert unconfused(text) == "ana petrova"


def test_words_of_other_scripts_keep_the_letters_that_pass_for_no_latin_one() -> None:
    assert unconfused("Анна Петрова") == "a\u043d\u043da \u043fe\u0442po\u0432a"
    assert folded("\u0410na") == "\u0430na"  # keys and stored text keep their letters


@pytest.mark.parametrize(
    "text",
    [
        "Łukasz Żółw",
        unicodedata.normalize("NFD", "ŁUKASZ ŻÓŁW"),
        "Ｌｕｋａｓｚ Ｚｏｌｗ",
        "lukasz\u200b zolw",
    ],
)
def test_without_accents_and_strokes_a_name_reads_as_its_plain_letters(text: str) -> None:
    assert unaccented(text) == "lukasz zolw"


def test_a_subject_is_stored_in_one_spelling_unless_that_outgrows_its_column() -> None:
    assert stored_subject(" Ａｎａ\u200b ") == "Ana"
    assert stored_subject("") == ""
    # NFKC writes U+FDFA as 18 letters: 8 of them would not fit 128 characters.
    long = "\ufdfa" * 8
    assert len(spelled(long)) > 128 and stored_subject(long) == long


@pytest.mark.parametrize("text", ["\u200b\u200b\u200b\u200b", "  a\u00ad\u00ad ", "\u3000ab\u3000"])
def test_a_text_match_counts_what_a_reader_sees(text: str) -> None:
    with pytest.raises(ValueError, match="at least 3 characters"):
        Selector.by_text("acme", text)


def test_a_subject_of_invisible_characters_names_no_one() -> None:
    with pytest.raises(ValueError, match="needs a value"):
        Selector.by_subject("acme", " \u200b ")


@pytest.mark.parametrize(
    "key",
    ["diet", "Diet", "diet ", "DIET", "di\u200bet", "ｄｉｅｔ", " Diet\t", "di\u00adet"],
)
def test_every_spelling_of_a_key_is_one_slot(key: str) -> None:
    assert folded_key(key) == "diet"


def test_an_item_key_of_the_langgraph_adapter_is_matched_as_written() -> None:
    assert folded_key("lg:users/ana:Prefs") == "lg:users/ana:Prefs"
    assert folded_key("lg:users/ana:prefs") != folded_key("lg:users/ana:Prefs")
    assert folded_key("Lg:users") == "lg:users"  # not the adapter's: folded as any key


def test_a_key_that_reads_longer_than_the_limit_is_refused() -> None:
    long = "\ufdfa" * 20  # one character, eighteen letters once read (NFKC)
    verdict = judge(
        Candidate(
            Scope("acme", "ana", "triage"),
            Kind.FACT,
            "a fact",
            Provenance(Source.STATED),
            key=long,
        ),
        AgentRules(),
    )
    assert (verdict.action, verdict.rule) == (Action.REFUSE, "too-long")
