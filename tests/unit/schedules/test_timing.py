"""Next-fire arithmetic, above all across daylight-saving changes.

Expected instants are written as local wall time with their UTC offset, so each
row reads the way a user would check it on a clock.
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedules.definition import Cron, Event, Heartbeat, Schedule, Trigger
from schedules.timing import fires_between, next_fire, next_fires

MINUTE = timedelta(minutes=1)


def schedule(trigger: Trigger, name: str = "job", **settings_: Any) -> Schedule:
    return Schedule(name=name, agent="agent", tenant="acme", trigger=trigger, **settings_)


def cron(expression: str, zone: str = "UTC", **settings_: Any) -> Schedule:
    return schedule(Cron(expression, zone), **settings_)


def at(text: str) -> datetime:
    value = datetime.fromisoformat(text)
    assert value.tzinfo is not None, text
    return value


def wall(fires: list[datetime], zone: str) -> list[str]:
    return [f.astimezone(ZoneInfo(zone)).isoformat() for f in fires]


def wall_one(fire: datetime | None, zone: str) -> str | None:
    return None if fire is None else fire.astimezone(ZoneInfo(zone)).isoformat()


# --- DST tables -------------------------------------------------------------------

DST_CASES = [
    # Europe/Berlin 2025: spring 03-30 02:00 CET -> 03:00 CEST, autumn 10-26 03:00 -> 02:00.
    ("Europe/Berlin", "30 2 * * *", "2025-03-29T00:00+01:00", "2025-03-31T23:00+02:00",
     ["2025-03-29T02:30:00+01:00", "2025-03-30T03:00:00+02:00", "2025-03-31T02:30:00+02:00"]),
    ("Europe/Berlin", "30 2 * * *", "2025-10-25T00:00+02:00", "2025-10-27T23:00+01:00",
     ["2025-10-25T02:30:00+02:00", "2025-10-26T02:30:00+02:00", "2025-10-27T02:30:00+01:00"]),
    ("Europe/Berlin", "0 2 * * *", "2025-03-30T00:00+01:00", "2025-03-30T23:00+02:00",
     ["2025-03-30T03:00:00+02:00"]),
    ("Europe/Berlin", "0 3 * * *", "2025-03-30T00:00+01:00", "2025-03-30T23:00+02:00",
     ["2025-03-30T03:00:00+02:00"]),
    ("Europe/Berlin", "*/20 2 * * *", "2025-03-30T00:00+01:00", "2025-03-30T23:00+02:00",
     ["2025-03-30T03:00:00+02:00"]),
    ("Europe/Berlin", "*/20 2 * * *", "2025-10-26T00:00+02:00", "2025-10-26T23:00+01:00",
     ["2025-10-26T02:00:00+02:00", "2025-10-26T02:20:00+02:00", "2025-10-26T02:40:00+02:00"]),
    ("Europe/Berlin", "0 * * * *", "2025-10-26T00:30+02:00", "2025-10-26T03:30+01:00",
     ["2025-10-26T01:00:00+02:00", "2025-10-26T02:00:00+02:00",
      "2025-10-26T02:00:00+01:00", "2025-10-26T03:00:00+01:00"]),
    ("Europe/Berlin", "@hourly", "2025-03-30T00:30+01:00", "2025-03-30T04:30+02:00",
     ["2025-03-30T01:00:00+01:00", "2025-03-30T03:00:00+02:00", "2025-03-30T04:00:00+02:00"]),
    ("Europe/Berlin", "30 * * * *", "2025-03-30T00:45+01:00", "2025-03-30T04:00+02:00",
     ["2025-03-30T01:30:00+01:00", "2025-03-30T03:30:00+02:00"]),
    ("Europe/Berlin", "*/30 * * * *", "2025-10-26T01:45+02:00", "2025-10-26T03:00+01:00",
     ["2025-10-26T02:00:00+02:00", "2025-10-26T02:30:00+02:00", "2025-10-26T02:00:00+01:00",
      "2025-10-26T02:30:00+01:00", "2025-10-26T03:00:00+01:00"]),
    # Six fields: the last is seconds (croniter's convention).
    ("Europe/Berlin", "15 */1 * * * 30", "2025-10-26T01:00+02:00", "2025-10-26T03:00+01:00",
     ["2025-10-26T01:15:30+02:00", "2025-10-26T02:15:30+02:00", "2025-10-26T02:15:30+01:00"]),
    ("Europe/Berlin", "30 2 * * * 15", "2025-03-30T00:00+01:00", "2025-03-30T23:00+02:00",
     ["2025-03-30T03:00:00+02:00"]),
    ("Europe/Berlin", "59 1 * * * */20", "2025-03-30T00:00+01:00", "2025-03-30T23:00+02:00",
     ["2025-03-30T01:59:00+01:00", "2025-03-30T01:59:20+01:00", "2025-03-30T01:59:40+01:00"]),
    # America/New_York 2025: spring 03-09 02:00 -> 03:00, autumn 11-02 02:00 -> 01:00.
    ("America/New_York", "30 2 * * *", "2025-03-09T00:00-05:00", "2025-03-10T23:00-04:00",
     ["2025-03-09T03:00:00-04:00", "2025-03-10T02:30:00-04:00"]),
    ("America/New_York", "30 1 * * *", "2025-11-01T12:00-04:00", "2025-11-03T12:00-05:00",
     ["2025-11-02T01:30:00-04:00", "2025-11-03T01:30:00-05:00"]),
    ("America/New_York", "0 * * * *", "2025-11-02T00:30-04:00", "2025-11-02T02:30-05:00",
     ["2025-11-02T01:00:00-04:00", "2025-11-02T01:00:00-05:00", "2025-11-02T02:00:00-05:00"]),
    # Australia/Sydney 2025 (southern): autumn 04-06 03:00 -> 02:00, spring 10-05 02:00 -> 03:00.
    ("Australia/Sydney", "30 2 * * *", "2025-04-05T00:00+11:00", "2025-04-07T23:00+10:00",
     ["2025-04-05T02:30:00+11:00", "2025-04-06T02:30:00+11:00", "2025-04-07T02:30:00+10:00"]),
    ("Australia/Sydney", "30 2 * * *", "2025-10-04T00:00+10:00", "2025-10-06T23:00+11:00",
     ["2025-10-04T02:30:00+10:00", "2025-10-05T03:00:00+11:00", "2025-10-06T02:30:00+11:00"]),
    ("Australia/Sydney", "0 * * * *", "2025-04-06T01:30+11:00", "2025-04-06T03:30+10:00",
     ["2025-04-06T02:00:00+11:00", "2025-04-06T02:00:00+10:00", "2025-04-06T03:00:00+10:00"]),
    # Pacific/Chatham: +12:45/+13:45, changes at 02:45 / 03:45 local.
    ("Pacific/Chatham", "0 3 * * *", "2025-09-27T00:00+12:45", "2025-09-29T23:00+13:45",
     ["2025-09-27T03:00:00+12:45", "2025-09-28T03:45:00+13:45", "2025-09-29T03:00:00+13:45"]),
    ("Pacific/Chatham", "0 3 * * *", "2025-04-05T00:00+13:45", "2025-04-07T23:00+12:45",
     ["2025-04-05T03:00:00+13:45", "2025-04-06T03:00:00+13:45", "2025-04-07T03:00:00+12:45"]),
    ("Pacific/Chatham", "0 * * * *", "2025-09-28T01:30+12:45", "2025-09-28T05:30+13:45",
     ["2025-09-28T02:00:00+12:45", "2025-09-28T04:00:00+13:45", "2025-09-28T05:00:00+13:45"]),
    # Australia/Lord_Howe: a 30-minute shift.
    ("Australia/Lord_Howe", "45 1 * * *", "2025-04-06T00:00+11:00", "2025-04-06T23:00+10:30",
     ["2025-04-06T01:45:00+11:00"]),
    ("Australia/Lord_Howe", "*/30 * * * *", "2025-04-06T01:15+11:00", "2025-04-06T02:15+10:30",
     ["2025-04-06T01:30:00+11:00", "2025-04-06T01:30:00+10:30", "2025-04-06T02:00:00+10:30"]),
    ("Australia/Lord_Howe", "15 2 * * *", "2025-10-05T00:00+10:30", "2025-10-05T23:00+11:00",
     ["2025-10-05T02:30:00+11:00"]),
    # America/Sao_Paulo 2018/19: the change is at midnight.
    ("America/Sao_Paulo", "0 0 * * *", "2018-11-02T12:00-03:00", "2018-11-05T12:00-02:00",
     ["2018-11-03T00:00:00-03:00", "2018-11-04T01:00:00-02:00", "2018-11-05T00:00:00-02:00"]),
    ("America/Sao_Paulo", "30 23 * * *", "2019-02-15T12:00-02:00", "2019-02-17T12:00-03:00",
     ["2019-02-15T23:30:00-02:00", "2019-02-16T23:30:00-02:00"]),
    # Asia/Tehran 2021: +03:30/+04:30, also at midnight.
    ("Asia/Tehran", "0 0 * * *", "2021-03-20T12:00+03:30", "2021-03-23T12:00+04:30",
     ["2021-03-21T00:00:00+03:30", "2021-03-22T01:00:00+04:30", "2021-03-23T00:00:00+04:30"]),
    ("Asia/Tehran", "30 23 * * *", "2021-09-20T12:00+04:30", "2021-09-22T23:59+03:30",
     ["2021-09-20T23:30:00+04:30", "2021-09-21T23:30:00+04:30", "2021-09-22T23:30:00+03:30"]),
]  # fmt: skip


@pytest.mark.parametrize(("zone", "expression", "start", "end", "expected"), DST_CASES)
def test_fires_across_dst_changes(
    zone: str, expression: str, start: str, end: str, expected: list[str]
) -> None:
    fires = fires_between(cron(expression, zone), at(start), at(end))

    assert wall(fires, zone) == expected
    assert all(f.tzinfo is UTC for f in fires)


FIRES_PER_DAY = [
    ("Europe/Berlin", date(2025, 3, 30), "0 * * * *", 23),
    ("Europe/Berlin", date(2025, 10, 26), "0 * * * *", 25),
    ("Europe/Berlin", date(2025, 3, 30), "@hourly", 23),
    ("Europe/Berlin", date(2025, 10, 26), "@hourly", 25),
    ("Europe/Berlin", date(2025, 3, 30), "30 * * * *", 23),
    ("Europe/Berlin", date(2025, 10, 26), "30 * * * *", 25),
    ("Europe/Berlin", date(2025, 3, 30), "*/15 * * * *", 92),
    ("Europe/Berlin", date(2025, 10, 26), "*/15 * * * *", 100),
    ("Europe/Berlin", date(2025, 3, 30), "* * * * *", 23 * 60),
    ("Europe/Berlin", date(2025, 10, 26), "* * * * *", 25 * 60),
    ("Europe/Berlin", date(2025, 3, 30), "*/10 * * * * 30", 23 * 6),
    ("Europe/Berlin", date(2025, 10, 26), "*/10 * * * * 30", 25 * 6),
    ("Europe/Berlin", date(2025, 3, 30), "0 */2 * * *", 12),  # hour-pinned: 02:00 -> 03:00
    ("Europe/Berlin", date(2025, 10, 26), "0 */2 * * *", 12),  # 02:00 once
    ("America/New_York", date(2025, 3, 9), "0 * * * *", 23),
    ("America/New_York", date(2025, 11, 2), "0 * * * *", 25),
    ("Australia/Sydney", date(2025, 4, 6), "0 * * * *", 25),
    ("Australia/Sydney", date(2025, 10, 5), "0 * * * *", 23),
    ("Pacific/Chatham", date(2025, 4, 6), "*/15 * * * *", 100),
    ("Pacific/Chatham", date(2025, 9, 28), "*/15 * * * *", 92),
    ("Europe/Berlin", date(2025, 6, 1), "0 * * * *", 24),
]


@pytest.mark.parametrize(("zone", "day", "expression", "count"), FIRES_PER_DAY)
def test_every_hour_patterns_follow_real_time(
    zone: str, day: date, expression: str, count: int
) -> None:
    tz = ZoneInfo(zone)
    start = datetime.combine(day, time(0), tz) - timedelta(microseconds=1)
    end = datetime.combine(day + timedelta(days=1), time(0), tz) - timedelta(microseconds=1)

    fires = fires_between(cron(expression, zone), start, end)

    assert len(fires) == count
    if expression.split()[1:2] == ["*"] or expression == "@hourly":
        gaps = {b - a for a, b in zip(fires, fires[1:], strict=False)}
        assert len(gaps) == 1, f"uneven real-time spacing: {sorted(gaps)}"


YEARS = {
    "Europe/Berlin": 2025,
    "America/New_York": 2025,
    "Australia/Sydney": 2025,
    "Pacific/Chatham": 2025,
    "Australia/Lord_Howe": 2025,
    "America/Sao_Paulo": 2018,
    "Asia/Tehran": 2021,
}


@pytest.mark.parametrize("zone", sorted(YEARS))
@pytest.mark.parametrize("clock", ["00:00", "00:30", "01:30", "02:00", "02:30", "03:00", "23:30"])
def test_daily_schedules_fire_once_every_calendar_day(zone: str, clock: str) -> None:
    tz, year = ZoneInfo(zone), YEARS[zone]
    hour, minute = map(int, clock.split(":"))
    start = datetime(year, 1, 1, tzinfo=tz) - timedelta(microseconds=1)
    end = datetime(year + 1, 1, 1, tzinfo=tz) - timedelta(microseconds=1)

    fires = fires_between(cron(f"{minute} {hour} * * *", zone), start, end)

    days = Counter(f.astimezone(tz).date() for f in fires)
    assert len(days) == (date(year + 1, 1, 1) - date(year, 1, 1)).days
    assert set(days.values()) == {1}


# --- an independent oracle around every transition -------------------------------


@functools.cache
def transitions(zone: str, year: int) -> tuple[datetime, ...]:
    """The instants in `year` at which `zone` changes offset, found by scanning."""
    tz, found = ZoneInfo(zone), []
    t = datetime(year, 1, 1, tzinfo=UTC)
    while t.year == year:
        if t.astimezone(tz).utcoffset() != (t + timedelta(hours=1)).astimezone(tz).utcoffset():
            low, high = t, t + timedelta(hours=1)
            while high - low > MINUTE:
                mid = low + (high - low) / 2
                if mid.astimezone(tz).utcoffset() == low.astimezone(tz).utcoffset():
                    low = mid
                else:
                    high = mid
            found.append(high.replace(second=0, microsecond=0))
        t += timedelta(hours=1)
    return tuple(found)


def oracle(expression: str, zone: str, low: datetime, high: datetime) -> list[datetime]:
    """The policy restated over real minutes instead of wall times: every instant
    whose wall time matches fires, except second occurrences of hour-pinned times;
    hour-pinned times the clock skipped fire at the first instant after the jump."""
    tz = ZoneInfo(zone)
    every_hour = croniter.expand(expression)[0][1] == ["*"]
    fires, previous, t = [], None, low
    while t <= high:
        local = t.astimezone(tz)
        clock = local.replace(tzinfo=None, fold=0)
        offset = local.utcoffset()
        assert offset is not None
        if previous is not None and offset > previous and not every_hour:
            skipped = clock - (offset - previous)
            while skipped < clock:
                if croniter.match(expression, skipped) and t not in fires:
                    fires.append(t)
                skipped += MINUTE
        matches = croniter.match(expression, clock) and (local.fold == 0 or every_hour)
        if matches and t not in fires:
            fires.append(t)
        previous, t = offset, t + MINUTE
    return fires


ORACLE_EXPRESSIONS = [
    "0 * * * *",
    "30 * * * *",
    "*/15 * * * *",
    "30 2 * * *",
    "0 2 * * *",
    "45 1 * * *",
    "*/20 1-3 * * *",
    "0,30 2,3 * * *",
    "0 0 * * *",
    "30 23 * * *",
]


@pytest.mark.parametrize("zone", sorted(YEARS))
@pytest.mark.parametrize("expression", ORACLE_EXPRESSIONS)
def test_matches_oracle_around_each_transition(zone: str, expression: str) -> None:
    for change in transitions(zone, YEARS[zone]):
        low, high = change - timedelta(hours=3), change + timedelta(hours=3)
        fires = fires_between(cron(expression, zone), low - MINUTE, high)
        assert fires == oracle(expression, zone, low, high), (zone, expression, change)


def test_next_fire_from_inside_a_repeated_hour() -> None:
    berlin = "Europe/Berlin"
    every = cron("*/20 * * * *", berlin)
    pinned = cron("*/20 2 * * *", berlin)

    assert (
        wall_one(next_fire(every, at("2025-10-26T02:10+02:00")), berlin)
        == "2025-10-26T02:20:00+02:00"
    )
    assert (
        wall_one(next_fire(every, at("2025-10-26T02:50+02:00")), berlin)
        == "2025-10-26T02:00:00+01:00"
    )
    assert (
        wall_one(next_fire(every, at("2025-10-26T02:10+01:00")), berlin)
        == "2025-10-26T02:20:00+01:00"
    )
    assert (
        wall_one(next_fire(pinned, at("2025-10-26T02:50+02:00")), berlin)
        == "2025-10-27T02:00:00+01:00"
    )
    assert (
        wall_one(next_fire(pinned, at("2025-10-26T02:10+01:00")), berlin)
        == "2025-10-27T02:00:00+01:00"
    )


# --- property: random expressions, several zones ---------------------------------

CRON_FIELDS = st.tuples(
    st.sampled_from(["0", "30", "15,45", "*/15", "*/20", "0-10/5", "59", "*"]),
    st.sampled_from(["*", "0", "1", "2", "3", "*/2", "1-3", "2,14", "0-23", "*/1"]),
    st.sampled_from(["*", "*", "1", "15", "26"]),
    st.sampled_from(["*", "*", "3,4,9,10,11", "2-4"]),
    st.sampled_from(["*", "*", "0", "1-5", "sun"]),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fields=CRON_FIELDS,
    seconds=st.sampled_from([None, "0", "*/30"]),
    zone=st.sampled_from(sorted(YEARS)),
    probes=st.lists(st.integers(min_value=0, max_value=6 * 3600 - 1), max_size=8),
)
def test_fires_strictly_increase_and_agree_with_next_fire(
    fields: tuple[str, ...], seconds: str | None, zone: str, probes: list[int]
) -> None:
    expression = " ".join(fields if seconds is None else (*fields, seconds))
    job = cron(expression, zone)
    for change in transitions(zone, YEARS[zone]):
        low, high = change - timedelta(hours=3), change + timedelta(hours=3)
        fires = fires_between(job, low, high)

        assert all(a < b for a, b in zip(fires, fires[1:], strict=False))
        chain, after = [], low
        while (fire := next_fire(job, after)) is not None and fire <= high:
            chain.append(fire)
            after = fire
        assert chain == fires
        for offset in probes:
            probe = low + timedelta(seconds=offset, microseconds=offset % 7)
            expected = next((f for f in fires if f > probe), None)
            if expected is not None:
                assert next_fire(job, probe) == expected
        if seconds is None:
            assert fires == oracle(expression, zone, low + MINUTE, high)


# --- heartbeats -------------------------------------------------------------------


def beat(every: str, name: str = "pulse", **options: Any) -> Schedule:
    units = {"s": "seconds", "m": "minutes", "h": "hours"}
    interval = timedelta(**{units[every[-1]]: int(every[:-1])})
    settings_ = {k: options.pop(k) for k in ("start", "end") if k in options}
    return schedule(Heartbeat(interval, **options), name=name, **settings_)


def test_heartbeat_is_anchored_to_the_epoch_without_start() -> None:
    job = beat("30m")

    assert next_fires(job, at("2025-05-05T10:07:00+00:00"), 3) == [
        at("2025-05-05T10:30:00+00:00"),
        at("2025-05-05T11:00:00+00:00"),
        at("2025-05-05T11:30:00+00:00"),
    ]
    assert next_fire(job, at("2025-05-05T10:30:00+00:00")) == at("2025-05-05T11:00:00+00:00")


def test_heartbeat_is_anchored_to_start_and_start_is_inclusive() -> None:
    start = at("2025-05-05T10:07:00+02:00")
    job = beat("30m", start=start)

    assert next_fire(job, at("2025-01-01T00:00:00+00:00")) == start
    assert next_fires(job, start, 2) == [start + timedelta(minutes=30), start + timedelta(hours=1)]


def test_heartbeat_jitter_is_deterministic_and_bounded() -> None:
    every, jitter = timedelta(minutes=10), timedelta(minutes=3)
    job = schedule(Heartbeat(every, jitter), name="pulse")
    after = at("2025-05-05T00:00:00+00:00")

    fires = next_fires(job, after, 50)

    assert fires == next_fires(job, after, 50)  # a second beat computes the same
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    for fire in fires:
        k = (fire - epoch) // every
        digest = hashlib.sha256(f"pulse:{k}".encode()).digest()
        expected = (int.from_bytes(digest[:8], "big") * (jitter // timedelta(microseconds=1))) >> 64
        assert fire == epoch + k * every + timedelta(microseconds=expected)
    assert len({(f - epoch) % every for f in fires}) > 40  # actually spread
    other = next_fires(schedule(Heartbeat(every, jitter), name="other"), after, 50)
    assert other != fires


@pytest.mark.parametrize(
    ("hours", "day", "expected_local_hours"),
    [
        ((time(8), time(18)), date(2025, 6, 1), list(range(8, 18))),
        ((time(8), time(18)), date(2025, 3, 30), list(range(8, 18))),
        ((time(22), time(6)), date(2025, 6, 1), [0, 1, 2, 3, 4, 5, 22, 23]),
        # Real-time beats: no 02:00 on the spring day, two on the autumn day.
        ((time(22), time(6)), date(2025, 3, 30), [0, 1, 3, 4, 5, 22, 23]),
        ((time(22), time(6)), date(2025, 10, 26), [0, 1, 2, 2, 3, 4, 5, 22, 23]),
        ((time(8, 30), time(0)), date(2025, 6, 1), list(range(9, 24))),  # "08:30-24:00"
    ],
)
def test_heartbeat_skips_fires_outside_active_hours(
    hours: tuple[time, time], day: date, expected_local_hours: list[int]
) -> None:
    tz = ZoneInfo("Europe/Berlin")
    job = beat("1h", active_hours=hours, timezone="Europe/Berlin")
    start = datetime.combine(day, time(0), tz) - timedelta(microseconds=1)
    end = datetime.combine(day + timedelta(days=1), time(0), tz) - timedelta(microseconds=1)

    fires = fires_between(job, start, end)

    assert [f.astimezone(tz).hour for f in fires] == expected_local_hours


def test_heartbeat_outside_active_hours_forever_never_fires() -> None:
    job = beat("24h", active_hours=(time(8), time(18)))  # always at 00:00 UTC

    assert next_fire(job, at("2025-01-01T00:00:00+00:00")) is None


def test_heartbeat_with_active_hours_and_a_short_interval_stays_fast() -> None:
    job = beat("1s", active_hours=(time(9), time(9, 0, 3)))

    fires = fires_between(job, at("2025-01-01T00:00:00Z"), at("2025-01-03T00:00:00Z"))

    assert wall(fires, "UTC") == [
        f"2025-01-0{d}T09:00:0{s}+00:00" for d in (1, 2) for s in (0, 1, 2)
    ]


# --- start, end, limits and refusals ----------------------------------------------


def test_cron_honours_start_inclusive_and_end_exclusive() -> None:
    job = cron("0 * * * *", start=at("2025-01-01T10:00:00Z"), end=at("2025-01-01T13:00:00Z"))

    assert next_fire(job, at("2024-12-01T00:00:00Z")) == at("2025-01-01T10:00:00Z")
    assert next_fires(job, at("2024-12-01T00:00:00Z"), 10) == [
        at("2025-01-01T10:00:00Z"),
        at("2025-01-01T11:00:00Z"),
        at("2025-01-01T12:00:00Z"),
    ]
    assert next_fire(job, at("2025-01-01T12:00:00Z")) is None
    assert fires_between(job, at("2025-01-01T00:00:00Z"), at("2026-01-01T00:00:00Z")) == [
        at("2025-01-01T10:00:00Z"),
        at("2025-01-01T11:00:00Z"),
        at("2025-01-01T12:00:00Z"),
    ]


def test_heartbeat_honours_end() -> None:
    job = beat("1h", end=at("2025-01-01T03:00:00Z"))

    assert next_fires(job, at("2025-01-01T00:30:00Z"), 5) == [
        at("2025-01-01T01:00:00Z"),
        at("2025-01-01T02:00:00Z"),
    ]


def test_fires_between_excludes_start_includes_end_and_truncates() -> None:
    job = cron("*/15 * * * *")
    start, end = at("2025-01-01T00:00:00Z"), at("2025-01-01T01:00:00Z")

    assert fires_between(job, start, end) == [
        start + timedelta(minutes=m) for m in (15, 30, 45, 60)
    ]
    assert fires_between(job, start, end, limit=2) == [
        start + timedelta(minutes=15),
        start + timedelta(minutes=30),
    ]
    assert fires_between(job, end, start) == []


def test_event_never_fires() -> None:
    job = schedule(Event())
    now = at("2025-01-01T00:00:00Z")

    assert next_fire(job, now) is None
    assert next_fires(job, now, 3) == []
    assert fires_between(job, now, now + timedelta(days=1)) == []


@pytest.mark.parametrize(
    "call",
    [
        lambda job, naive: next_fire(job, naive),
        lambda job, naive: next_fires(job, naive, 1),
        lambda job, naive: fires_between(job, naive, datetime(2026, 1, 1, tzinfo=UTC)),
        lambda job, naive: fires_between(job, datetime(2024, 1, 1, tzinfo=UTC), naive),
    ],
)
def test_naive_datetimes_are_refused(call: Any) -> None:
    with pytest.raises(ValueError, match="time-zone aware"):
        call(cron("@daily"), datetime(2025, 1, 1))


def test_results_are_utc_whatever_the_zone_of_after() -> None:
    fire = next_fire(cron("0 9 * * *", "Asia/Tokyo"), at("2025-01-01T00:00:00-08:00"))

    assert fire == at("2025-01-02T09:00:00+09:00")
    assert fire is not None and fire.tzinfo is UTC


@pytest.mark.parametrize(
    ("expression", "after", "expected"),
    [
        ("0 0 29 2 *", "2025-01-01T00:00:00Z", "2028-02-29T00:00:00+00:00"),
        ("0 0 L * *", "2025-02-01T00:00:00Z", "2025-02-28T00:00:00+00:00"),
        ("0 9 * * mon#2", "2025-01-01T00:00:00Z", "2025-01-13T09:00:00+00:00"),
        ("@weekly", "2025-01-01T00:00:00Z", "2025-01-05T00:00:00+00:00"),
        ("@yearly", "2025-01-01T00:00:00Z", "2026-01-01T00:00:00+00:00"),
        ("* * * * * */20", "2025-01-01T00:00:05Z", "2025-01-01T00:00:20+00:00"),
        ("0 0 1,15 * 1", "2025-01-01T00:00:00Z", "2025-01-06T00:00:00+00:00"),  # dom OR dow
    ],
)
def test_croniter_syntax(expression: str, after: str, expected: str) -> None:
    assert wall_one(next_fire(cron(expression), at(after)), "UTC") == expected


def test_next_fires_refuses_a_negative_count() -> None:
    with pytest.raises(ValueError, match="n must not be negative"):
        next_fires(cron("@daily"), at("2025-01-01T00:00:00Z"), -1)


@pytest.mark.parametrize(
    "job",
    [
        cron("30 2 * * *", "Europe/Berlin"),
        cron("0 * * * *", start=at("2026-05-01T00:00:00+00:00")),
        cron("0 0 * * *", end=at("2026-03-02T00:00:00+00:00")),
        beat("5m", jitter=timedelta(minutes=1)),
        schedule(Event()),
    ],
    ids=["cron-berlin", "cron-start", "cron-ended", "heartbeat", "event"],
)
def test_one_next_fire_is_the_first_of_many(job: Schedule) -> None:
    """`next_fires(…, 1)` takes `next_fire`'s shortcut (what `schedules list` asks)."""
    after = at("2026-03-29T00:10:00+00:00")
    assert next_fires(job, after, 1) == next_fires(job, after, 3)[:1]
