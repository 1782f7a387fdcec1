"""The TTL configuration as loads use it: one per process, from NIGHTSHIFT_MEMORY_TTL,
compiled into the load's statements (so it must hash, and equal configurations alike)."""

from __future__ import annotations

import pytest

from memory.expiry import TtlConfig
from memory.records import Kind, Layer
from workers.settings import Settings, SettingsError


def test_derived_spans_bound_the_range_predicate() -> None:
    ttl = TtlConfig.parse("default=60;episode=14;tenant=180;private/fact=30")
    assert ttl.spans == (14, 30, 60, 180)
    assert ttl.longest_days == 180 and not ttl.uniform
    assert TtlConfig.parse("default=120").uniform
    assert TtlConfig().longest_days == 90


def test_equal_configurations_hash_alike() -> None:
    spelled = TtlConfig.parse("episode=30")
    built = TtlConfig(by_kind={Kind.EPISODE: 30})
    assert spelled == built and hash(spelled) == hash(built)
    assert {spelled: "statement"}[built] == "statement"
    assert TtlConfig.parse("episode=31") != spelled


def test_settings_give_the_parsed_ttl() -> None:
    ttl = Settings.from_env({"NIGHTSHIFT_MEMORY_TTL": "default=120;private/fact=150"}).ttl()
    assert ttl.days(Layer.PRIVATE, Kind.FACT) == 150
    assert ttl.days(Layer.SHARED, Kind.FACT) == 120
    assert Settings.from_env({}).ttl() == TtlConfig()


@pytest.mark.parametrize(
    ("value", "message"),
    [("episode=3", "allowed is 7–180"), ("often=30", "not one of"), ("fact", "not name=days")],
)
def test_a_malformed_ttl_fails_when_settings_are_read(value: str, message: str) -> None:
    with pytest.raises(SettingsError, match=f"NIGHTSHIFT_MEMORY_TTL='{value}'.*{message}"):
        Settings.from_env({"NIGHTSHIFT_MEMORY_TTL": value})


@pytest.mark.parametrize("value", ["-1", "36501", "99999999999"])
def test_purge_after_days_out_of_range_fails_when_settings_are_read(value: str) -> None:
    # 99999999999 was an OverflowError traceback from timedelta at the first purge
    with pytest.raises(SettingsError, match=f"NIGHTSHIFT_PURGE_AFTER_DAYS={value}.*0–36500"):
        Settings.from_env({"NIGHTSHIFT_PURGE_AFTER_DAYS": value})
