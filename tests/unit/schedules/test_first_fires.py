"""`timing.first_fires`: the first fires of many schedules at once, as `next_fire`
gives them one by one (the beat's start-up and `schedules list` ask it)."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedules.api import Schedules
from schedules.catalog import AppliedSchedule
from schedules.definition import Cron, Event, Heartbeat, Schedule, Trigger
from schedules.timing import first_fires, next_fire

# Around Berlin's autumn change (2025-10-26 03:00 CEST -> 02:00 CET) and New York's
# spring one (2025-03-09 02:00 EST -> 03:00 EDT).
CHANGES = (datetime(2025, 10, 26, 1, tzinfo=UTC), datetime(2025, 3, 9, 7, tzinfo=UTC))
TRIGGERS: list[Trigger] = [
    Cron("30 2 * * *", "Europe/Berlin"),
    Cron("30 2 * * *", "America/New_York"),
    Cron("*/20 * * * *", "Europe/Berlin"),
    Cron("*/20 * * * *", "America/New_York"),
    Cron("0 0 29 2 *", "UTC"),  # once in four years
    Cron("0 9 * * mon-fri", "Asia/Tokyo"),
    Heartbeat(timedelta(minutes=7), jitter=timedelta(seconds=40)),
    Heartbeat(timedelta(minutes=30), active_hours=(time(1), time(3)), timezone="Europe/Berlin"),
    Event(),
]


def job(i: int, trigger: Trigger, start: datetime | None, end: datetime | None) -> Schedule:
    return Schedule(name=f"s{i}", agent="a", tenant="t", trigger=trigger, start=start, end=end)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    change=st.sampled_from(CHANGES),
    asks=st.lists(
        st.tuples(
            st.sampled_from(range(len(TRIGGERS))),
            st.integers(min_value=-6 * 3600, max_value=6 * 3600),  # after, seconds from change
            st.sampled_from([None, -3600, 0, 1800]),  # start
            st.sampled_from([None, 0, 3600, 7200]),  # end
        ),
        max_size=40,
    ),
)
def test_first_fires_equal_next_fire_one_by_one(
    change: datetime, asks: list[tuple[int, int, int | None, int | None]]
) -> None:
    pairs = []
    for i, (trigger, after, start, end) in enumerate(asks):
        start_at = None if start is None else change + timedelta(seconds=start)
        end_at = None if end is None else change + timedelta(seconds=end)
        if start_at is not None and end_at is not None and start_at >= end_at:
            end_at = None
        schedule = job(i, TRIGGERS[trigger], start_at, end_at)
        pairs.append((schedule, change + timedelta(seconds=after, microseconds=after % 3)))

    assert first_fires(pairs) == [next_fire(s, after) for s, after in pairs]


def test_afters_between_two_fires_share_the_later_one() -> None:
    daily = job(0, Cron("0 7 * * *", "Europe/Berlin"), None, None)
    day = datetime(2026, 3, 2, tzinfo=UTC)
    afters = [day + timedelta(hours=h) for h in (5, 0, 6, 5.999, 7, 30)]
    assert first_fires([(daily, a) for a in afters]) == [
        day + timedelta(hours=6),
        day + timedelta(hours=6),
        day + timedelta(days=1, hours=6),
        day + timedelta(hours=6),
        day + timedelta(days=1, hours=6),
        day + timedelta(days=2, hours=6),
    ]


def test_naive_afters_are_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        first_fires([(job(0, Cron("* * * * *"), None, None), datetime(2026, 3, 2))])


def test_the_api_gives_each_listed_schedule_its_next_fire_in_its_zone() -> None:
    now = datetime(2026, 3, 2, 12, tzinfo=UTC)
    reads: list[datetime] = []

    def clock() -> datetime:
        reads.append(now)
        return now

    def applied(i: int, trigger: Trigger, paused: bool = False) -> AppliedSchedule:
        return AppliedSchedule(job(i, trigger, None, None), paused, "", 1, None, 0, deleted=False)

    listed = [
        applied(0, Cron("0 7 * * *", "Europe/Berlin")),
        applied(1, Cron("0 7 * * *", "Europe/Berlin"), paused=True),
        applied(2, Heartbeat(timedelta(minutes=5), timezone="Asia/Tokyo")),
        applied(3, Event()),
        applied(4, Cron("0 7 * * *", "America/New_York")),
    ]
    api = Schedules(engine=None, runs=None, clock=clock)  # type: ignore[arg-type]
    fires = api.first_fires(listed)
    assert [f.isoformat() if f else None for f in fires] == [
        "2026-03-03T07:00:00+01:00",
        None,  # paused
        "2026-03-02T21:05:00+09:00",
        None,  # an event never fires
        "2026-03-03T07:00:00-05:00",
    ]
    assert fires == [None if a.paused else (api.next_for(a, 1, now) or [None])[0] for a in listed]
    assert len(reads) == 1  # one `now` for the whole listing
