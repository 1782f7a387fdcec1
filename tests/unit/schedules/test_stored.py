"""`Schedule.from_stored`: the beat's fast load of definitions it stored itself."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time, timedelta

import pytest

from schedules.catalog import load_definition
from schedules.definition import Catchup, Cron, Event, Heartbeat, Overlap, Schedule

SCHEDULES = [
    Schedule(name="a", agent="x", tenant="t", trigger=Cron("*/5 * * * * 30", "Europe/Berlin")),
    Schedule(
        name="b",
        agent="x",
        tenant="t",
        user="ana",
        goal="g",
        payload={"folder": "INBOX", "n": [1, 2]},
        trigger=Heartbeat(
            timedelta(minutes=5),
            jitter=timedelta(seconds=1.5),
            active_hours=(time(8), time(18)),
            timezone="America/New_York",
        ),
        start=datetime(2026, 1, 1, tzinfo=UTC),
        end=datetime(2027, 1, 1, tzinfo=UTC),
        max_runs=3,
        paused=True,
        pause_note="why",
        overlap=Overlap.BUFFER_ONE,
        catchup=Catchup.ALL,
        catchup_window=timedelta(hours=1),
        time_limit=timedelta(seconds=90),
        retries=2,
        source="f.toml:3",
    ),
    Schedule(name="c", agent="x", tenant="t", trigger=Event()),
]


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: s.name)
def test_from_stored_equals_from_json(schedule: Schedule) -> None:
    stored = Schedule.from_stored(schedule.to_json())
    assert stored == schedule == Schedule.from_json(schedule.to_json())
    assert stored.fingerprint() == schedule.fingerprint()


def test_unexpected_shapes_fall_back_to_full_validation() -> None:
    data = SCHEDULES[0].to_json()
    data["retries"] = -1
    data.pop("source")
    with pytest.raises(ValueError, match="retries"):
        Schedule.from_stored(data)


def test_stored_triggers_are_shared_and_follow_an_edit() -> None:
    data = SCHEDULES[0].to_json()
    first, second = Schedule.from_stored(data), Schedule.from_stored({**data, "name": "a2"})
    assert first.trigger is second.trigger  # parsed once, frozen: safe to share
    edited = {**data, "trigger": {**data["trigger"], "timezone": "Asia/Tokyo"}}
    assert Schedule.from_stored(edited).trigger == Cron("*/5 * * * * 30", "Asia/Tokyo")
    assert Schedule.from_stored(data).trigger == Cron("*/5 * * * * 30", "Europe/Berlin")


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"big": 2**70, "negative": -(2**63) - 1, "edge": 2**64 - 1},  # orjson: floats
        {"ratio": 0.1, "tiny": 5e-324, "nested": [{"n": 1.5}]},
        {"text": "é 😀", "lone": "\ud800"},  # orjson refuses a lone surrogate
        {"deep": [[[{"a": [True, None, "x"]}]]]},
    ],
)
def test_definitions_load_as_json_loads_them(payload: dict[str, object]) -> None:
    text = json.dumps({**SCHEDULES[0].to_json(), "payload": payload})
    loaded = load_definition(text)
    assert loaded == json.loads(text)
    assert repr(loaded) == repr(json.loads(text))  # ints stay ints, floats floats
