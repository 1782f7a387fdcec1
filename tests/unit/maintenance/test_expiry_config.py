"""TTL configuration and the decay arithmetic: pure, with an injected `now`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memory import reinforcement
from memory.expiry import TtlConfig, TtlConfigError
from memory.records import Kind, Layer
from memory.reinforcement import Direction, Vote, VoteError

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def test_default_ttl_is_90_days_everywhere() -> None:
    ttl = TtlConfig()
    assert {ttl.days(layer, kind) for layer in Layer for kind in Kind} == {90}


def test_most_specific_ttl_wins() -> None:
    ttl = TtlConfig.parse("default=60; episode=30, private=120; private/episode=7d")
    assert ttl.days(Layer.SHARED, Kind.FACT) == 60
    assert ttl.days(Layer.SHARED, Kind.EPISODE) == 30
    assert ttl.days(Layer.PRIVATE, Kind.FACT) == 120
    assert ttl.days(Layer.PRIVATE, Kind.EPISODE) == 7


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("default=6", "TTL for 'default' is 6 days; allowed is 7–180 days"),
        ("fact=181", "TTL for 'fact' is 181 days; allowed is 7–180 days"),
        ("episode", "TTL entry 'episode' is not name=days"),
        ("fact=soon", "'soon' is not whole days"),
        ("fact=\u0669\u0660", "is not whole days"),  # Arabic-Indic 90: `int` reads it
        ("fact=9_0", "'9_0' is not whole days"),
        ("fact=-30", "'-30' is not whole days"),
        ("facts=30", "'facts' is not one of"),
        ("team/fact=30", "'team' is not a layer"),
        ("default=90;default=30", "TTL entry 'default=30': 'default' is given twice"),
        ("fact=30, FACT=60", "TTL entry 'FACT=60': 'fact' is given twice"),
        ("private/fact=30;private/fact=60", "'private/fact' is given twice"),
    ],
)
def test_bad_ttl_is_refused_naming_the_entry(spec: str, message: str) -> None:
    with pytest.raises(TtlConfigError, match=message):
        TtlConfig.parse(spec)


def test_ttl_bounds_hold_for_direct_construction_too() -> None:
    with pytest.raises(TtlConfigError, match="allowed is 7–180"):
        TtlConfig(by_kind={Kind.FACT: 200})


def test_ranking_multiplier_is_bounded_and_neutral_when_fresh() -> None:
    assert reinforcement.ranking_multiplier(1.0, NOW, NOW) == pytest.approx(1.0)
    assert reinforcement.ranking_multiplier(99.0, NOW, NOW) == 1.5
    assert reinforcement.ranking_multiplier(-5.0, NOW, NOW) == 0.5
    ages = [0, 30, 90, 365, 10_000]
    values = [reinforcement.ranking_multiplier(1.0, NOW - timedelta(days=d), NOW) for d in ages]
    assert values == sorted(values, reverse=True)  # decays with time since reinforcement
    assert all(0.5 <= v <= 1.5 for v in values)
    half = reinforcement.effective_score(1.0, NOW - timedelta(days=90), NOW)
    assert half == pytest.approx(0.5)


def test_vote_messages_round_trip_and_bad_ones_say_which_field() -> None:
    vote = Vote("m1", Direction.UP, "run:triage", "run-7")
    assert Vote.from_json(vote.to_json()) == vote
    with pytest.raises(VoteError, match="'direction' is 'sideways'"):
        Vote.from_json({"memory_id": "m1", "direction": "sideways", "voter": "x"})
    with pytest.raises(VoteError, match="field 'voter'"):
        Vote.from_json({"memory_id": "m1", "direction": "up"})
