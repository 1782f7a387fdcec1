"""The LangGraph adapter's pure parts: item encoding and LangGraph's matching rules."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("langgraph.store.base", reason="SKIPPED LOUDLY: pip install '.[langgraph]'")

from memory.langgraph import encoding, matching  # noqa: E402
from memory.langgraph.encoding import ItemPath  # noqa: E402

labels = st.text(min_size=1, max_size=12)
paths = st.tuples(st.lists(labels, min_size=1, max_size=4).map(tuple), st.text(max_size=12))


@given(paths, paths)
def test_memory_key_is_injective(
    a: tuple[tuple[str, ...], str], b: tuple[tuple[str, ...], str]
) -> None:
    if a != b:
        assert encoding.memory_key(*a) != encoding.memory_key(*b)


@given(
    st.lists(st.text(min_size=1, max_size=200), min_size=1, max_size=5).map(tuple),
    st.text(max_size=300),
)
def test_memory_key_fits_the_column(namespace: tuple[str, ...], key: str) -> None:
    encoded = encoding.memory_key(namespace, key)
    assert len(encoded) <= encoding.MAX_KEY_CHARS and encoding.is_item_key(encoded)


def test_readable_keys_escape_their_separators() -> None:
    assert encoding.memory_key(("users", "ana/b"), "prefs:1") == "lg:users/ana%2Fb:prefs%3A1"
    assert encoding.memory_key(("a", "b"), "c") != encoding.memory_key(("a/b",), "c")
    assert encoding.memory_key(("a",), "b:c") != encoding.memory_key(("a:b",), "c")


def test_long_paths_hash() -> None:
    key = encoding.memory_key(("x" * 300,), "k")
    assert key.startswith("lg#") and len(key) == 67


@given(paths, st.one_of(st.none(), st.floats(min_value=0, max_value=1e6)))
def test_reference_round_trips(path: tuple[tuple[str, ...], str], ttl: float | None) -> None:
    item = ItemPath(path[0], path[1], ttl)
    assert encoding.parse_reference(encoding.reference(item)) == item


@pytest.mark.parametrize("text", ["", "feed#1", "langgraph:", "langgraph:[1]", "langgraph:{}"])
def test_foreign_references_are_not_items(text: str) -> None:
    assert encoding.parse_reference(text) is None


def test_values_are_canonical_json() -> None:
    content = encoding.encode_value(("n",), "k", {"b": 1, "a": ["ü", None]})
    assert content == '{"a":["ü",null],"b":1}'
    assert encoding.decode_value(content) == {"a": ["ü", None], "b": 1}


@pytest.mark.parametrize("value", [{"x": math.nan}, {"x": object()}, ["not", "a", "mapping"]])
def test_values_that_are_not_json_objects_are_refused(value: object) -> None:
    with pytest.raises(TypeError, match=r"LangGraph item \('n',\)/'k'"):
        encoding.encode_value(("n",), "k", value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("actual", "operator", "operand", "expected"),
    [
        (3, "$gt", 2, True),
        (3, "$gt", 2.5, True),
        (10, "$gt", 9, True),  # numerically (PostgresStore compares text: "10" < "9")
        (2, "$gte", 2, True),
        (2, "$lt", 2, False),
        (2, "$lte", 2.0, True),
        ("b", "$gt", "a", True),  # strings with strings
        ("10", "$gt", 9, False),  # a string and a number do not order
        (None, "$gt", 1, False),  # a missing field does not match (InMemoryStore raises)
        (True, "$gt", 0, False),  # booleans are not numbers here
        (1, "$eq", 1.0, True),
        ("x", "$ne", "y", True),
        (None, "$ne", "y", True),
    ],
)
def test_operators(actual: object, operator: str, operand: object, expected: bool) -> None:
    assert matching.apply_operator(actual, operator, operand) is expected


def test_unknown_operators_raise_before_any_item_is_read() -> None:
    with pytest.raises(ValueError, match=r"Unsupported operator: \$regex"):
        matching.check_filter({"name": {"$regex": "a.*"}})
    matching.check_filter({"meta": {"plain": "nested value"}, "n": {"$gte": 1}})


def test_nested_and_list_filters() -> None:
    value = {"meta": {"size": "L", "fit": "slim"}, "tags": ["x", "y"]}
    assert matching.matches_filter(value, {"meta": {"size": "L"}})
    assert not matching.matches_filter(value, {"meta": {"size": "M"}})
    assert matching.matches_filter(value, {"tags": ["x", "y"]})
    assert not matching.matches_filter(value, {"tags": ["x"]})
    assert not matching.matches_filter(value, {"tags": {"size": "L"}})
    assert matching.matches_filter(value, None) and matching.matches_filter(value, {})


@pytest.mark.parametrize(
    ("match_type", "path", "namespace", "expected"),
    [
        ("prefix", ("a",), ("a", "b"), True),
        ("prefix", ("a", "*"), ("a", "b"), True),
        ("prefix", ("a", "*"), ("a",), False),
        ("prefix", ("b",), ("a", "b"), False),
        ("suffix", ("b",), ("a", "b"), True),
        ("suffix", ("*", "b"), ("a", "b"), True),
        ("suffix", ("a",), ("a", "b"), False),
        ("prefix", (), ("a",), True),
    ],
)
def test_namespace_conditions(
    match_type: str, path: tuple[str, ...], namespace: tuple[str, ...], expected: bool
) -> None:
    assert matching.matches_condition(match_type, path, namespace) is expected


def test_search_prefix_is_label_wise() -> None:
    assert matching.in_prefix(("docs", "a"), ("docs",))
    assert not matching.in_prefix(("docsx",), ("docs",))
    assert matching.in_prefix(("anything",), ())


def test_max_depth_truncates_and_deduplicates() -> None:
    found = {("a", "b", "c"), ("a", "b", "d"), ("a", "c")}
    assert matching.list_namespaces(found, [], max_depth=2, limit=10, offset=0) == [
        ("a", "b"),
        ("a", "c"),
    ]
