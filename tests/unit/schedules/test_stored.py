"""`Schedule.from_stored`: the beat's fast load of definitions it stored itself."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest

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
