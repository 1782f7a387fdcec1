"""The pure parts of consolidation and forgetting: plan checks, clustering, summaries,
selectors and the report's arithmetic."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory.consolidation import (
    InvariantViolation,
    Merge,
    Plan,
    summary_text,
)
from memory.consolidation_plan import FIRST_RANGES, _tenant_ranges
from memory.forgetting import ForgetReport, ReportArithmeticError, Selector, SelectorKind
from memory.near_duplicates import clusters, groups, sketch
from memory.records import Scope

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def words(text: str) -> frozenset[str]:
    return frozenset(text.split())


def test_a_plan_that_absorbs_twice_or_into_an_absorbed_memory_is_refused() -> None:
    with pytest.raises(InvariantViolation, match="absorbs a memory twice"):
        Plan(
            "acme", NOW, 3, (Merge("b", "a", "same-content", 1), Merge("b", "c", "same-key", 1))
        ).check()
    with pytest.raises(InvariantViolation, match="merges into a memory it also absorbs"):
        Plan(
            "acme", NOW, 3, (Merge("b", "a", "same-content", 1), Merge("a", "c", "same-key", 1))
        ).check()


def test_clusters_join_near_duplicates_only_above_the_bar() -> None:
    texts = [
        words("the billing api p99 latency was two seconds during the evening peak"),
        words("the billing api p99 latency was two seconds during the evening peak again"),
        words("ward 3 closes at 9"),
        words("ward 3 closes at 10"),
    ]
    buckets = [[0, 1, 2, 3]]
    assert clusters(texts, buckets, 0.85) == [[0, 1]]
    assert sorted(clusters(texts, buckets, 0.5)) == [[0, 1], [2, 3]]


def test_near_duplicate_groups_are_found_by_their_sketches_alone() -> None:
    base = "the quarterly invoice for acme is due on the first of march every year"
    contents = [
        "an unrelated note about the staging server and its disk",
        base,
        base.upper(),  # same words up to case
        base + " again",  # one word more: Jaccard 13/14
        "the quarterly report for globex is late",
    ]
    assert groups(contents, 0.85) == [[1, 2, 3]]
    assert groups(contents, 0.99) == [[1, 2]]


def test_a_sketch_is_the_same_in_every_process_and_ignores_word_order() -> None:
    words = frozenset(["alpha", "beta", "gamma", "delta"])
    assert sketch(words) == sketch(frozenset(["delta", "gamma", "beta", "alpha"]))
    # Fixed value: blake2b word hashes, not Python's per-process salted `hash`.
    assert sketch(frozenset(["one"])) == [(0, 0x34F2DDAA8B7615C9)]


def test_summary_text_is_dated_and_bounded() -> None:
    items = [(NOW + timedelta(days=i), f"handled INC-{i} " + "x" * 500) for i in range(40)]
    text = summary_text(items)
    assert text.startswith("Summary of 40 episodes, 2026-12-01 to 2027-01-09:")
    assert len(text) <= 4100 and "more" in text.splitlines()[-1]


def test_selectors_refuse_what_cannot_be_meant() -> None:
    with pytest.raises(ValueError, match="at least 3 characters"):
        Selector.by_text("acme", " a ")
    with pytest.raises(ValueError, match="'guess' is not a valid Source"):
        Selector.by_source("acme", "guess")
    with pytest.raises(ValueError, match="same tenant"):
        Selector("acme", SelectorKind.SCOPE, scope=Scope("other", "ana"))
    assert Selector.by_text("acme", "penicillin").describe() == {"by": "text"}  # never the text


def test_a_report_that_does_not_add_up_is_never_returned() -> None:
    good = ForgetReport(
        "t", {"by": "run"}, scanned=5, skipped=1, deleted=3, failed=1, remaining=0, exhaustive=True
    )
    assert good.check() is good
    with pytest.raises(
        ReportArithmeticError, match="scanned 5 != skipped 1 \\+ deleted 3 \\+ failed 0"
    ):
        ForgetReport(
            "t", {}, scanned=5, skipped=1, deleted=3, failed=0, remaining=0, exhaustive=True
        ).check()
    with pytest.raises(ReportArithmeticError, match="must say why"):
        ForgetReport(
            "t", {}, scanned=0, skipped=0, deleted=0, failed=0, remaining=2, exhaustive=False
        ).check()


def test_tenant_ranges_cover_every_tenant_once_in_order_the_first_ones_small() -> None:
    active = {f"t{i:02}": 100 for i in range(100)}
    ranges = _tenant_ranges(active)
    names = sorted(active)
    covered = [n for lo, hi in ranges for n in names if lo <= n <= hi]
    assert covered == names  # consecutive, disjoint, nothing left out
    sizes = [sum(active[n] for n in names if lo <= n <= hi) for lo, hi in ranges]
    shares = [sum(sizes[: i + 1]) / sum(sizes) for i in range(len(sizes))]
    assert len(ranges) == len(FIRST_RANGES) + 1
    assert all(got >= want for got, want in zip(shares, FIRST_RANGES, strict=False))
    assert sizes[0] < sizes[-1]
    assert _tenant_ranges({}) == []
    assert _tenant_ranges({"solo": 10}) == [("solo", "solo")]
    # A tenant larger than a range's share is a range of its own, never split.
    assert _tenant_ranges({"a": 1000, "b": 1}) == [("a", "a"), ("b", "b")]
