"""The prefilter of `memory.literals` never says "no match" where the regex matches.

Checked three ways: on the write gate's own patterns (`memory.phrasing`) with text
that holds a match of each (drawn from the pattern itself) and with text made of
the patterns' words and punctuation; and on random patterns built from every
construct the analysis reads, against text drawn from those patterns.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory import phrasing
from memory.literals import required, screen, trie

INSTRUCTION = [*phrasing._INSTRUCTION, *(p for _, p in phrasing._GATED)]
GROUPS = [
    (INSTRUCTION, phrasing._INSTRUCTION_SCREEN),
    (list(phrasing._PLAN_LOWERED), phrasing._PLAN_LOWERED_SCREEN),
    (list(phrasing._PLAN_CASED), phrasing._PLAN_CASED_SCREEN),
]
PATTERNS = [p for patterns, _ in GROUPS for p in patterns]
SCREEN_OF = {p: s for patterns, s in GROUPS for p in patterns}


def _holds_all(pattern: re.Pattern[str], text: str) -> bool:
    return all(any(s in text for s in strings) for strings in required(pattern))


def _words(patterns: list[re.Pattern[str]]) -> list[str]:
    """The letters runs and punctuation of the patterns' sources: what an adversary
    would try to assemble a match from."""
    found: set[str] = set()
    for p in patterns:
        found.update(re.findall(r"[a-z'’-]+|[^\w\s\\]", p.pattern))
    return sorted(found)


WORDS = _words(PATTERNS)
SEPARATORS = [" ", "  ", "\n", "\t", ", ", ": ", ". ", "", "\u00a0"]


@pytest.mark.parametrize("pattern", PATTERNS, ids=lambda p: p.pattern[:40])
@settings(max_examples=150, deadline=None, database=None)
@given(data=st.data())
def test_a_text_holding_a_match_passes_the_prefilter(
    pattern: re.Pattern[str], data: st.DataObject
) -> None:
    text = data.draw(st.from_regex(pattern))
    assert pattern.search(text)
    assert _holds_all(pattern, text), (pattern.pattern, text)
    assert SCREEN_OF[pattern].search(text), (pattern.pattern, text)


@settings(max_examples=1500, deadline=None, database=None)
@given(
    st.lists(
        st.one_of(st.sampled_from(WORDS), st.sampled_from(SEPARATORS), st.text(max_size=3)),
        max_size=40,
    ),
    st.booleans(),
)
def test_text_made_of_the_patterns_words_is_judged_as_without_the_prefilter(
    parts: list[str], lowered: bool
) -> None:
    text = "".join(parts)
    text = "\n" + (text.lower() if lowered else text)
    for pattern in PATTERNS:
        if pattern.search(text):
            assert _holds_all(pattern, text), (pattern.pattern, text)
            assert SCREEN_OF[pattern].search(text), (pattern.pattern, text)


def test_the_gate_s_examples_pass_the_prefilter() -> None:
    """Every instruction and plan the policy tests name passes its screen (if one did
    not, the gate would miss it: `looks_like_instruction` asks the screen first)."""
    from tests.unit.memory import test_policy

    examples = [
        *(v for v in vars(test_policy).values() if isinstance(v, str)),
        *(
            text
            for mark in (
                test_policy.test_looks_like_instruction,
                test_policy.test_looks_like_plan,
                test_policy.test_an_observed_order_is_refused_not_kept_as_a_fact,
            )
            for m in getattr(mark, "pytestmark", [])
            if m.name == "parametrize"
            for text in m.args[1]
        ),
    ]
    assert len(examples) > 50
    for text in examples:
        for t in ("\n" + text.lower(), "\n" + text):
            for pattern in PATTERNS:
                if pattern.search(t):
                    assert _holds_all(pattern, t) and SCREEN_OF[pattern].search(t), text


# -- random patterns -----------------------------------------------------------------------

_ATOMS = st.sampled_from(
    ["a", "b", "ab", "ba", "x", r"\.", " ", "[ab]", "[a-c]", "[^a]", ".", r"\s", r"\w", r"\d"]
)


def _pattern() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.lists(inner, min_size=2, max_size=4).map("".join),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: "(?:" + "|".join(xs) + ")"),
            st.tuples(inner, st.sampled_from(["*", "+", "?", "{2}", "{1,3}", "{0,2}", "+?"])).map(
                lambda t: f"(?:{t[0]}){t[1]}"
            ),
            inner.map(lambda x: f"({x})"),
            inner.map(lambda x: f"(?={x})"),
            inner.map(lambda x: f"(?!{x})"),
            inner.map(lambda x: f"(?<!{x[:1] or 'a'})" if x[:1].isalpha() else x),
            inner.map(lambda x: rf"\b{x}"),
            inner.map(lambda x: f"^{x}$"),
        )

    return st.recursive(_ATOMS, extend, max_leaves=8)


@settings(max_examples=600, deadline=None, database=None)
@given(source=_pattern(), data=st.data())
def test_required_holds_for_random_patterns(source: str, data: st.DataObject) -> None:
    try:
        pattern = re.compile(source)
    except re.error:
        return
    texts = [
        data.draw(st.text(alphabet="abcx. \n", max_size=12)),
        data.draw(st.from_regex(pattern)),
    ]
    for text in texts:
        if pattern.search(text):
            assert _holds_all(pattern, text), (source, text, required(pattern))
            assert screen([pattern]).search(text), (source, text)


def test_what_is_required() -> None:
    sets = required(re.compile(r"ignore\s+(?:previous|prior)\s+rules"))
    assert set(sets) >= {
        frozenset({"ignore"}),
        frozenset({"previous", "prior"}),
        frozenset({"rules"}),
    }
    assert sets[0] == frozenset({"ignore"})  # the most telling first
    assert required(re.compile("abc")) == (frozenset({"abc"}),)
    assert required(re.compile("a(?:b|c)d")) == (frozenset({"abd", "acd"}),)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (r"(?i)ignore", ()),
        (r"(?i:ignore)", ()),
        (r"\w+", ()),
        (r"a*", ()),
        (r"(?:abc)?", ()),
        (r"(a)\1", (frozenset({"a"}),)),
        (r"[^x]yz?", (frozenset({"y", "yz"}),)),
        (r"x(?:ab|\w)", (frozenset({"x"}),)),
    ],
)
def test_nothing_is_required_where_nothing_is_sure(
    source: str, expected: tuple[frozenset[str], ...]
) -> None:
    assert required(re.compile(source)) == expected


def test_a_screen_over_a_pattern_that_requires_nothing_passes_every_text() -> None:
    assert screen([re.compile(r"\w+"), re.compile("abc")]).search("nothing in it")
    assert screen([re.compile("abc"), re.compile("xyz")]).search("nothing in it") is None


def test_a_flagged_pattern_requires_nothing() -> None:
    assert required(re.compile("ignore", re.IGNORECASE)) == ()


def test_trie() -> None:
    pattern = re.compile(trie(["akia", "aws", "ghp_", "a"]))
    assert [m.group() for m in pattern.finditer("x aws akia ghp_ b")] == ["aws", "akia", "ghp_"]


def test_every_gate_screen_screens_something() -> None:
    """A pattern the analysis can read nothing from turns its screen into the empty
    pattern: still correct, but every text is then searched pattern by pattern."""
    for _, gate_screen in GROUPS:
        assert gate_screen.pattern and gate_screen.search("w12 w7 customer invoice") is None
