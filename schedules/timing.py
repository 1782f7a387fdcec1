"""When a schedule fires: pure functions of an explicit, time-zone-aware instant.

Nothing here reads the clock, the database or `paused`/`max_runs` (the scheduler
owns those). Every argument datetime must be aware (naive ones raise
`ValueError`) and every result is an aware UTC datetime. A schedule fires only in
[start, end): `start` inclusive, `end` exclusive.

Cron and daylight saving time
-----------------------------
A cron expression describes wall-clock times in the schedule's time zone. We let
croniter enumerate *naive* wall times (where it has no DST bugs) and map each to
real instants ourselves with `zoneinfo`:

- **Repeated wall time** (autumn, clocks go back): fires once, at the first
  occurrence — unless the expression's hour field is `*` (it matches every hour:
  `@hourly`, `0 * * * *`, `*/5 * * * *`, `* * * * * */10`, …). Those follow real
  time and also fire in the repeated hour, so `@hourly` fires 25 times that day.
- **Missing wall time** (spring, clocks jump forward): a schedule whose hour field
  is pinned fires once at the instant the clock jumps to (`30 2 * * *` in Berlin
  fires at 03:00 CEST that day). An every-hour expression skips the missing hour,
  since real time did not pass through it: `@hourly` fires 23 times that day, and
  a `30 * * * *` job fires 01:30 CET then 03:30 CEST, one real hour apart.
- The result is deduplicated and strictly increasing; a daily schedule fires
  exactly once every calendar day, across both changes, in every zone.

Heartbeats
----------
A heartbeat runs on real (UTC) time, unaffected by DST: fire k is at
`anchor + k * every + jitter_k`, where the anchor is `start` (or the Unix epoch) and
jitter_k is derived from sha256(f"{name}:{k}") into [0, jitter), so every beat
computes the same instants. A fire whose local time (in the heartbeat's time zone)
is outside `active_hours` is skipped, not moved; the next fire inside the window
runs. A heartbeat none of whose fires falls inside its window within about two
years (e.g. every 24h at 00:00 UTC, active 08:00-18:00 UTC) is treated as never
firing.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import heapq
import itertools
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from schedules.cron import compile_cron
from schedules.definition import Cron, Heartbeat, Schedule, load_zone

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_NAIVE = EPOCH.replace(tzinfo=None)
_MICROSECOND = timedelta(microseconds=1)
_SECOND = timedelta(seconds=1)
_GIVE_UP_AFTER = timedelta(days=800)  # of heartbeat fires all outside active hours


def next_fire(schedule: Schedule, after: datetime) -> datetime | None:
    """The first fire strictly after `after`, or None (event, past `end`, never)."""
    after = _utc(after, "after")
    trigger = schedule.trigger
    if not isinstance(trigger, Cron):
        return next(_fires(schedule, after), None)
    if schedule.start is not None and schedule.start > after:
        after = schedule.start.astimezone(UTC) - _MICROSECOND
    fire = _first_cron_fire(trigger.expression, trigger.timezone, after)
    if fire is None or (schedule.end is not None and fire >= schedule.end):
        return None
    return fire


@functools.lru_cache(maxsize=8192)
def _first_cron_fire(expression: str, timezone: str, after: datetime) -> datetime | None:
    """Cached: at start-up the beat asks this for thousands of schedules that share
    an expression, a time zone and `now`."""
    return next(_cron_fires(Cron(expression, timezone), after), None)


def first_fires(asks: Sequence[tuple[Schedule, datetime]]) -> list[datetime | None]:
    """`next_fire(schedule, after)` for each pair, with the same answers, computed
    together: what the beat asks for every schedule at start-up, and a listing.

    A cron's fires are a fixed set of instants, so if F is the first fire after
    A, it is also the first after any X in [A, F). Crons that share an expression
    and a time zone are answered in order of `after`, and croniter is asked again
    only for an `after` past the last answer: thousands of schedules whose
    `after` differs (their latest fire or edit) cost a few walks, not one each.
    """
    found: list[datetime | None] = [None] * len(asks)
    crons: dict[tuple[str, str], list[tuple[datetime, int]]] = {}
    for i, (schedule, after) in enumerate(asks):
        after = _utc(after, "after")
        trigger = schedule.trigger
        if not isinstance(trigger, Cron):
            found[i] = next(_fires(schedule, after), None)
            continue
        if schedule.start is not None and schedule.start > after:
            after = schedule.start.astimezone(UTC) - _MICROSECOND
        crons.setdefault((trigger.expression, trigger.timezone), []).append((after, i))
    for (expression, timezone), group in crons.items():
        group.sort(key=lambda ask: ask[0])
        fire: datetime | None = None
        asked = False
        for after, i in group:  # `fire` is the first after every earlier `after` …
            if not asked or (fire is not None and after >= fire):  # … and this one?
                fire, asked = _first_cron_fire(expression, timezone, after), True
            end = asks[i][0].end
            found[i] = None if fire is None or (end is not None and fire >= end) else fire
    return found


def next_fires(schedule: Schedule, after: datetime, n: int) -> list[datetime]:
    """The next `n` fires strictly after `after` (fewer if the schedule ends)."""
    if n < 0:
        raise ValueError(f"n must not be negative, got {n}")
    if n == 1:  # the common question (a listing); `next_fire` shares work between schedules
        first = next_fire(schedule, after)
        return [] if first is None else [first]
    return list(itertools.islice(_fires(schedule, _utc(after, "after")), n))


def fires_between(
    schedule: Schedule, start: datetime, end: datetime, limit: int = 10_000
) -> list[datetime]:
    """All fires in (start, end], oldest first, truncated to the first `limit`."""
    upper = _utc(end, "end")
    fires = _fires(schedule, _utc(start, "start"))
    return list(itertools.islice(itertools.takewhile(lambda f: f <= upper, fires), limit))


def _utc(value: datetime, name: str) -> datetime:
    if not isinstance(value, datetime):
        raise TypeError(f"{name} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be time-zone aware, got naive {value.isoformat()}")
    return value.astimezone(UTC)


def _fires(schedule: Schedule, after: datetime) -> Iterator[datetime]:
    """Fires strictly after `after` within [start, end), in order."""
    if schedule.start is not None and schedule.start > after:
        after = schedule.start.astimezone(UTC) - _MICROSECOND
    trigger = schedule.trigger
    if isinstance(trigger, Cron):
        fires = _cron_fires(trigger, after)
    elif isinstance(trigger, Heartbeat):
        fires = _heartbeat_fires(schedule.name, trigger, schedule.start, after)
    else:
        return
    end = schedule.end
    for fire in fires:
        if end is not None and fire >= end:
            return
        yield fire


# --- cron ------------------------------------------------------------------------


def _cron_fires(cron: Cron, after: datetime) -> Iterator[datetime]:
    compiled = compile_cron(cron.expression)
    zone = load_zone(cron.timezone)
    try:
        wall = after.astimezone(zone).replace(tzinfo=None, fold=0)
    except OverflowError:  # within a day of year 1 or 9999
        return
    first, second = _offsets(wall, zone)
    # Inside a repeated hour, earlier wall times still have second occurrences
    # after `after`: start that much earlier.
    margin = abs(first - second)
    walls = copy.copy(compiled.template)
    walls.set_current(wall - margin - _SECOND, force=True)

    pending: list[datetime] = []  # a heap: one wall time may map to two instants
    last: datetime | None = None
    while True:
        try:
            wall_time: datetime = walls.get_next(datetime)
            instants = _instants(wall_time, zone, every_hour=compiled.every_hour)
        except (ValueError, OverflowError):  # no further date, or past year 9999
            break
        for instant in instants:
            heapq.heappush(pending, instant)
        # Later wall times never map before this one's first instant.
        while pending and instants and pending[0] <= instants[0]:
            fire = heapq.heappop(pending)
            if fire > after and fire != last:
                last = fire
                yield fire
    while pending:
        fire = heapq.heappop(pending)
        if fire > after and fire != last:
            last = fire
            yield fire


def _offsets(wall: datetime, zone: ZoneInfo) -> tuple[timedelta, timedelta]:
    """UTC offsets of a naive wall time read as its first and second occurrence."""
    first = zone.utcoffset(wall.replace(fold=0))
    second = zone.utcoffset(wall.replace(fold=1))
    assert first is not None and second is not None  # ZoneInfo always answers
    return first, second


def _instants(wall: datetime, zone: ZoneInfo, *, every_hour: bool) -> tuple[datetime, ...]:
    """The instants at which the naive `wall` time fires, per the DST policy."""
    before, after = _offsets(wall, zone)
    if before == after:
        return ((wall - before).replace(tzinfo=UTC),)
    if before > after:  # clocks went back: the wall time happens twice
        first = (wall - before).replace(tzinfo=UTC)
        return (first, (wall - after).replace(tzinfo=UTC)) if every_hour else (first,)
    if every_hour:  # clocks jumped forward over it; real time never passed it
        return ()
    return (_transition(zone, wall - after, wall - before),)


def _transition(zone: ZoneInfo, low: datetime, high: datetime) -> datetime:
    """The instant in (low, high] (naive UTC) at which `zone` changes offset.

    Transitions fall on whole seconds, so a bisection over seconds finds it.
    """

    def offset(second: int) -> timedelta | None:
        return (EPOCH + second * _SECOND).astimezone(zone).utcoffset()

    lo = (low - _EPOCH_NAIVE) // _SECOND
    hi = -((_EPOCH_NAIVE - high) // _SECOND)
    before = offset(lo)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if offset(mid) == before:
            lo = mid
        else:
            hi = mid
    return EPOCH + hi * _SECOND


# --- heartbeat -------------------------------------------------------------------


def _jitter(name: str, k: int, jitter: timedelta) -> timedelta:
    if not jitter:
        return timedelta(0)
    digest = hashlib.sha256(f"{name}:{k}".encode()).digest()
    fraction = int.from_bytes(digest[:8], "big")  # in [0, 2**64)
    return ((fraction * (jitter // _MICROSECOND)) >> 64) * _MICROSECOND


def _heartbeat_fires(
    name: str, beat: Heartbeat, start: datetime | None, after: datetime
) -> Iterator[datetime]:
    anchor = start.astimezone(UTC) if start is not None else EPOCH
    k = (after - anchor) // beat.every
    if start is not None:
        k = max(k, 0)
    hours = beat.active_hours
    zone = load_zone(beat.timezone)
    give_up, last = max(_GIVE_UP_AFTER, 3 * beat.every), after
    try:
        while True:
            fire = anchor + k * beat.every + _jitter(name, k, beat.jitter)
            if fire <= after:
                k += 1
            elif hours is not None and not _is_active(fire, zone, hours):
                if fire - last > give_up:
                    return
                opening = _next_opening(fire, zone, hours[0])
                k = max(k + 1, (opening - anchor) // beat.every)
            else:
                yield fire
                last = fire
                k += 1
    except OverflowError:  # past year 9999
        return


def _is_active(fire: datetime, zone: ZoneInfo, hours: tuple[time, time]) -> bool:
    wall = fire.astimezone(zone).time()
    start, end = hours
    if start < end:
        return start <= wall < end
    return wall >= start or wall < end  # the window wraps midnight


def _next_opening(fire: datetime, zone: ZoneInfo, opens: time) -> datetime:
    """The first instant after `fire` at which the active window opens."""
    today = fire.astimezone(zone).date()
    for days in range(3):
        wall = datetime.combine(today + timedelta(days=days), opens)
        instant = _instants(wall, zone, every_hour=False)[0]
        if instant > fire:
            return instant
    raise AssertionError("a daily window always opens within two days")  # pragma: no cover
