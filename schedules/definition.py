"""What a schedule is: a trigger (cron, heartbeat or event) plus run settings.

Every record is frozen and validates itself in `__post_init__`, raising
`DefinitionError` (a `ValueError`) whose `field` names the offending attribute and
whose message says what is wrong and what is allowed. A `Schedule` that exists is
therefore valid: the file loader, `apply` and the beat never re-check it.

`Schedule.to_json()` / `Schedule.from_json()` are the storage form (the database
keeps the definition as JSON); `Schedule.fingerprint()` is what `apply` compares to
tell whether a stored definition changed.

Example:
    >>> s = Schedule(name="digest", agent="mailer", tenant="acme",
    ...              trigger=Cron("0 7 * * mon-fri", timezone="Europe/Berlin"))
    >>> s.kind
    'cron'
    >>> Schedule.from_json(s.to_json()) == s
    True
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import enum
import functools
import hashlib
import json
import re
import zoneinfo
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, time, timedelta
from typing import Any, Literal

from schedules.cron import compile_cron
from schedules.errors import DefinitionError

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
"""A schedule name: it is part of every run key (`name@fire-time`), so no spaces or `@`."""

MAX_PAYLOAD_BYTES = 64 * 1024
"""The largest payload, as compact JSON, a schedule may carry to each run."""

MAX_PAYLOAD_DEPTH = 64
"""How deeply lists and mappings may nest in a run's payload (a schedule's or an
event's). What walks a payload (encoding it, redacting secrets) recurses; a payload
a few hundred levels deep would fail there, in beat or a worker, not where it came in."""

MIN_HEARTBEAT = timedelta(seconds=1)

_UNUSABLE_ZONES = frozenset({"localtime", "Factory", "posixrules"})

_UNSHOWABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
"""What no text of a schedule may hold: NUL (PostgreSQL text cannot store it, so a
run row carrying it could never be written), the other C0 and C1 control characters
and DEL (a terminal obeys them instead of showing them), and lone surrogates (no
UTF-8 form). Tab and newline are allowed where a field is multi-line text."""
_UNSHOWABLE_ON_ONE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


class Overlap(enum.StrEnum):
    """What the beat does when a fire is due while the previous run still runs."""

    SKIP = "skip"  # drop the new fire
    BUFFER_ONE = "buffer_one"  # keep at most one waiting fire
    ALLOW_ALL = "allow_all"  # start it anyway
    CANCEL_OTHER = "cancel_other"  # cancel the running one, start the new one


class Catchup(enum.StrEnum):
    """Which fires missed within `catchup_window` (beat down, paused) still run."""

    NONE = "none"
    LATEST = "latest"
    ALL = "all"


# --- time zones and durations ----------------------------------------------------


@functools.cache
def _known_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones() - _UNUSABLE_ZONES)


def load_zone(key: str, *, field: str = "timezone") -> zoneinfo.ZoneInfo:
    """The IANA time zone `key`, or a `DefinitionError` suggesting a close name."""
    known = _known_zones()
    if isinstance(key, str) and key in known:
        return zoneinfo.ZoneInfo(key)
    if isinstance(key, str) and not known and key not in _UNUSABLE_ZONES:
        # No tz database to list (no tzdata); let zoneinfo decide.
        try:
            return zoneinfo.ZoneInfo(key)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            pass
    if isinstance(key, str) and key.isupper() and key.isalpha():  # PST, CEST, EDT …
        raise DefinitionError(field, abbreviation_problem(key))
    hint = difflib.get_close_matches(str(key), known, n=1)
    suggestion = (
        f"; did you mean {hint[0]!r}?" if hint else " (use an IANA name like 'Europe/Berlin')"
    )
    raise DefinitionError(field, f"unknown time zone {key!r}{suggestion}")


ABBREVIATIONS: dict[str, str] = {
    # tzdata's legacy names (CET, EST, EST5EDT …) and abbreviations people write;
    # EST, MST and HST in tzdata are fixed offsets that never observe DST.
    "CET": "Europe/Berlin",
    "CEST": "Europe/Berlin",
    "MET": "Europe/Berlin",
    "EET": "Europe/Athens",
    "EEST": "Europe/Athens",
    "WET": "Europe/Lisbon",
    "BST": "Europe/London",
    "EST": "America/New_York",
    "EDT": "America/New_York",
    "EST5EDT": "America/New_York",
    "CST": "America/Chicago",
    "CDT": "America/Chicago",
    "CST6CDT": "America/Chicago",
    "MST": "America/Denver",
    "MDT": "America/Denver",
    "MST7MDT": "America/Denver",
    "PST": "America/Los_Angeles",
    "PDT": "America/Los_Angeles",
    "PST8PDT": "America/Los_Angeles",
    "HST": "Pacific/Honolulu",
}


def abbreviation_problem(key: str) -> str:
    """What to say about a zone written as an abbreviation: it names an offset (or a
    legacy rule), not a place, so it does not follow a region's DST rules."""
    example = ABBREVIATIONS.get(key, "Europe/Berlin")
    return (
        f"time zone {key!r} is an abbreviation, not a region; "
        f"use an IANA name such as {example!r} (see docs/schedules.md, Time zones)"
    )


def format_duration(value: timedelta) -> str:
    """`timedelta(hours=1, minutes=30)` -> `"1h30m"`; the inverse of `parse_duration`."""
    micros = value // timedelta(microseconds=1)
    if micros == 0:
        return "0s"
    sign, micros = ("-", -micros) if micros < 0 else ("", micros)
    days, rest = divmod(micros, 86_400_000_000)
    hours, rest = divmod(rest, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds, fraction = divmod(rest, 1_000_000)
    parts = [f"{n}{unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "m")) if n]
    if fraction:
        parts.append(f"{seconds}.{fraction:06d}".rstrip("0") + "s")
    elif seconds:
        parts.append(f"{seconds}s")
    return sign + "".join(parts)


def _require_aware(value: datetime | None, name: str) -> None:
    if value is None:
        return
    if not isinstance(value, datetime):
        raise DefinitionError(name, f"{name} must be a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise DefinitionError(
            name,
            f"{name} {value.isoformat()} has no UTC offset; "
            "give one, e.g. 2025-01-01T00:00:00+01:00 or ...Z",
        )


# --- triggers --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Cron:
    """Fire on a croniter expression evaluated in `timezone` (5 fields, or 6 with
    seconds last), or an alias such as `@daily`. See `schedules.timing` for DST."""

    expression: str
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        if not isinstance(self.expression, str):
            raise DefinitionError("expression", "cron expression must be a string")
        compile_cron(self.expression)
        load_zone(self.timezone)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Fire every `every` of real time, each fire delayed by a deterministic jitter
    in [0, jitter); fires outside `active_hours` (wall clock in `timezone`, start
    inclusive, end exclusive, may wrap midnight) are skipped."""

    every: timedelta
    jitter: timedelta = timedelta(0)
    active_hours: tuple[time, time] | None = None
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        if not isinstance(self.every, timedelta):
            raise DefinitionError(
                "every", f"heartbeat interval must be a duration, got {type(self.every).__name__}"
            )
        if self.every < MIN_HEARTBEAT:
            raise DefinitionError(
                "every",
                f"heartbeat interval must be at least 1s, got {format_duration(self.every)}",
            )
        if not isinstance(self.jitter, timedelta) or self.jitter < timedelta(0):
            got = format_duration(self.jitter) if isinstance(self.jitter, timedelta) else "?"
            raise DefinitionError("jitter", f"jitter must not be negative, got {got}")
        if self.jitter >= self.every:
            raise DefinitionError(
                "jitter",
                f"jitter {format_duration(self.jitter)} must be shorter than "
                f"the interval {format_duration(self.every)}",
            )
        self._check_active_hours()
        load_zone(self.timezone)

    def _check_active_hours(self) -> None:
        hours = self.active_hours
        if hours is None:
            return
        if not (isinstance(hours, tuple) and len(hours) == 2):
            raise DefinitionError("active_hours", "active_hours must be a (start, end) pair")
        start, end = hours
        if not all(isinstance(t, time) and t.tzinfo is None for t in hours):
            raise DefinitionError(
                "active_hours", "active_hours must be two wall-clock times without time zone"
            )
        if start == end:
            raise DefinitionError(
                "active_hours",
                f"active_hours {start:%H:%M}-{end:%H:%M} is empty; leave it out to run all day",
            )


@dataclass(frozen=True, slots=True)
class Event:
    """No timer: runs are started by events, the CLI or the API."""


Trigger = Cron | Heartbeat | Event


# --- the schedule ----------------------------------------------------------------


def _seconds(value: timedelta) -> int | float:
    if value.microseconds:
        return value.total_seconds()
    return value // timedelta(seconds=1)


def _normalised_payload(payload: Any) -> dict[str, Any]:
    if not isinstance(payload, Mapping):
        raise DefinitionError("payload", f"payload must be a mapping, got {type(payload).__name__}")
    if not payload:
        return {}  # most schedules have none: nothing to check or copy
    if not all(isinstance(key, str) for key in payload):
        raise DefinitionError("payload", "payload keys must be strings")
    if nesting_depth(payload, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH:
        raise DefinitionError("payload", f"payload nests deeper than {MAX_PAYLOAD_DEPTH} levels")
    try:
        encoded = json.dumps(dict(payload), allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise DefinitionError("payload", f"payload must be JSON-serialisable: {exc}") from None
    if len(encoded.encode()) > MAX_PAYLOAD_BYTES:
        raise DefinitionError(
            "payload", f"payload is larger than {MAX_PAYLOAD_BYTES // 1024} KiB as JSON"
        )
    result: dict[str, Any] = json.loads(encoded)  # a deep copy the caller cannot mutate
    if problem := _payload_text_problem(result):
        raise DefinitionError("payload", problem)
    return result


def nesting_depth(value: Any, stop: int) -> int:
    """How deeply mappings and lists nest in `value` (a scalar is 0, `{"a": []}` is 2),
    counted without recursion; the count stops just past `stop`."""
    deepest, stack = 0, [(value, 0)]
    while stack and deepest <= stop:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, depth + 1)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _enum(kind: type[enum.StrEnum], value: Any, name: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(member.value for member in kind)
        raise DefinitionError(name, f"{name} must be one of {allowed}; got {value!r}") from None


def text_problem(value: str, *, multi_line: bool = False) -> str:
    """What in `value` a schedule's text may not hold, naming the character and where
    it is but never quoting the text ("holds a NUL character (U+0000) at character
    4; …"); "" when there is nothing. `multi_line` text may hold tabs and newlines."""
    found = (_UNSHOWABLE if multi_line else _UNSHOWABLE_ON_ONE_LINE).search(value)
    if found is None:
        return ""
    char = found.group()
    if char == "\x00":
        what = "a NUL character"
    elif "\ud800" <= char <= "\udfff":
        what = "a lone surrogate (not UTF-8)"
    else:
        what = "a control character"
    allowed = (
        "tab and newline are the only control characters allowed here"
        if multi_line
        else "this field is one line: no control characters, not even tab or newline"
    )
    return (
        f"holds {what} (U+{ord(char):04X}) at character {found.start() + 1}: remove it ({allowed})"
    )


SCOPE_CHARS = 128
"""The longest agent, tenant and user a run's row holds (`workers.tables.runs`)."""


def _require_text(
    value: Any, name: str, *, empty: bool, multi_line: bool = False, limit: int | None = None
) -> None:
    if not isinstance(value, str):
        raise DefinitionError(name, f"{name} must be a string, got {type(value).__name__}")
    if not empty and not value.strip():
        raise DefinitionError(name, f"{name} must not be empty")
    if limit is not None and len(value) > limit:
        raise DefinitionError(name, f"{name} has {len(value)} characters, more than {limit}")
    if problem := text_problem(value, multi_line=multi_line):
        raise DefinitionError(name, f"{name} {problem}")


def _payload_text_problem(payload: Mapping[str, Any]) -> str:
    """`text_problem` of the first string in a (plain JSON) payload, key or value,
    that has one, with the path to it: `payload['mail']['folder'] holds …`."""
    stack: list[tuple[str, Any]] = [("payload", payload)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if problem := text_problem(item, multi_line=True):
                return f"{path} {problem}"
            continue
        if isinstance(item, Mapping):
            children = []
            for key, value in item.items():
                if problem := text_problem(key, multi_line=True):
                    return f"a key in {path} {problem}"
                children.append((f"{path}[{key!r}]", value))
        elif isinstance(item, list):
            children = [(f"{path}[{i}]", value) for i, value in enumerate(item)]
        else:
            continue
        stack.extend(reversed(children))  # in the order they are written
    return ""


def _require_count(value: Any, name: str, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise DefinitionError(name, f"{name} must be a whole number >= {low}, got {value!r}")


@dataclass(frozen=True, slots=True)
class Schedule:
    """One named schedule: when (`trigger`, `start`, `end`) and what (`agent` for
    `tenant`/`user` with `goal` and `payload`), plus how the beat treats it.

    `start` is inclusive and `end` exclusive: fires happen in [start, end).
    `payload` is normalised to plain JSON on construction; treat it as read-only.
    """

    name: str
    agent: str
    tenant: str
    trigger: Trigger
    user: str = ""
    goal: str = ""
    payload: Mapping[str, Any] = field(default_factory=dict)
    start: datetime | None = None
    end: datetime | None = None
    max_runs: int | None = None
    paused: bool = False
    pause_note: str = ""
    overlap: Overlap = Overlap.SKIP
    catchup: Catchup = Catchup.LATEST
    catchup_window: timedelta = timedelta(minutes=5)
    time_limit: timedelta = timedelta(minutes=10)
    retries: int = 0
    source: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not NAME_PATTERN.match(self.name):
            raise DefinitionError(
                "name",
                f"schedule name {self.name!r} is invalid: use 1-128 letters, digits, "
                "'.', '_' or '-', starting with a letter or digit",
            )
        _require_text(self.agent, "agent", empty=False, limit=SCOPE_CHARS)
        _require_text(self.tenant, "tenant", empty=False, limit=SCOPE_CHARS)
        _require_text(self.user, "user", empty=True, limit=SCOPE_CHARS)
        _require_text(self.goal, "goal", empty=True, multi_line=True)
        _require_text(self.pause_note, "pause_note", empty=True)
        if not isinstance(self.source, str):
            raise DefinitionError(
                "source", f"source must be a string, got {type(self.source).__name__}"
            )
        if not isinstance(self.trigger, Cron | Heartbeat | Event):
            raise DefinitionError(
                "trigger", f"trigger must be Cron, Heartbeat or Event, got {self.trigger!r}"
            )
        object.__setattr__(self, "payload", _normalised_payload(self.payload))
        self._check_window()
        if self.max_runs is not None:
            _require_count(self.max_runs, "max_runs", 1)
        _require_count(self.retries, "retries", 0)
        if not isinstance(self.paused, bool):
            raise DefinitionError("paused", f"paused must be true or false, got {self.paused!r}")
        object.__setattr__(self, "overlap", _enum(Overlap, self.overlap, "overlap"))
        object.__setattr__(self, "catchup", _enum(Catchup, self.catchup, "catchup"))
        if not isinstance(self.catchup_window, timedelta) or self.catchup_window < timedelta(0):
            raise DefinitionError("catchup_window", "catchup_window must not be negative")
        if not isinstance(self.time_limit, timedelta) or self.time_limit <= timedelta(0):
            raise DefinitionError("time_limit", "time_limit must be positive")

    def _check_window(self) -> None:
        _require_aware(self.start, "start")
        _require_aware(self.end, "end")
        if self.start is not None and self.end is not None and self.start >= self.end:
            raise DefinitionError(
                "end",
                f"end {self.end.isoformat()} must be after start {self.start.isoformat()}",
            )

    def __hash__(self) -> int:  # payload is a dict; equal schedules share these
        return hash((self.name, self.agent, self.tenant))

    @property
    def kind(self) -> Literal["cron", "heartbeat", "event"]:
        if isinstance(self.trigger, Cron):
            return "cron"
        if isinstance(self.trigger, Heartbeat):
            return "heartbeat"
        return "event"

    def replace(self, **changes: Any) -> Schedule:
        """A copy with `changes` applied (and validated)."""
        return dataclasses.replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict; `Schedule.from_json(s.to_json()) == s`.

        Durations are seconds (int when whole), datetimes ISO 8601 with their offset.
        """
        return {
            "name": self.name,
            "agent": self.agent,
            "tenant": self.tenant,
            "user": self.user,
            "goal": self.goal,
            "payload": copy.deepcopy(dict(self.payload)),
            "trigger": _trigger_to_json(self.trigger),
            "start": self.start.isoformat() if self.start else None,
            "end": self.end.isoformat() if self.end else None,
            "max_runs": self.max_runs,
            "paused": self.paused,
            "pause_note": self.pause_note,
            "overlap": self.overlap.value,
            "catchup": self.catchup.value,
            "catchup_window": _seconds(self.catchup_window),
            "time_limit": _seconds(self.time_limit),
            "retries": self.retries,
            "source": self.source,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Schedule:
        """The inverse of `to_json`; raises `ValueError` on malformed input."""
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise DefinitionError(unknown[0], f"unknown schedule key(s): {', '.join(unknown)}")
        values = dict(data)
        try:
            values["trigger"] = _trigger_from_json(values["trigger"])
            for name in ("start", "end"):
                if values.get(name) is not None:
                    values[name] = datetime.fromisoformat(values[name])
            for name in ("catchup_window", "time_limit"):
                if name in values:
                    values[name] = timedelta(seconds=values[name])
        except DefinitionError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed schedule JSON: {exc!r}") from None
        try:
            return cls(**values)
        except TypeError as exc:  # a required key missing
            raise ValueError(f"malformed schedule JSON: {exc}") from None

    @classmethod
    def from_stored(cls, data: Mapping[str, Any]) -> Schedule:
        """`from_json` for definitions this code stored itself (validated on apply):
        the beat loads tens of thousands at start-up, and re-validating each one
        (payload round trip included) would dominate that. Triggers are shared
        between schedules that store the same one (they are frozen), so a cron is
        parsed once per expression and zone. Anything unexpected falls back to the
        full `from_json`."""
        try:
            if data.keys() != _FIELD_NAMES:
                return cls.from_json(data)
            schedule = object.__new__(cls)
            for name, set_field, convert in _STORED_FIELDS:
                value = data[name]
                set_field(schedule, value if convert is None else convert(value))
            return schedule
        except (KeyError, TypeError, ValueError):
            return cls.from_json(data)

    def fingerprint(self) -> str:
        """sha256 of the canonical JSON without `source`: moving a definition to
        another file or line is not a change, editing any setting is."""
        data = self.to_json()
        del data["source"]
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(canonical.encode()).hexdigest()


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(Schedule))
_OVERLAPS = {o.value: o for o in Overlap}
_CATCHUPS = {c.value: c for c in Catchup}


@functools.lru_cache(maxsize=1024)
def _stored_duration(seconds: int | float) -> timedelta:
    return timedelta(seconds=seconds)


def _stored_instant(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def _stored_payload(payload: Any) -> dict[str, Any]:
    return payload if isinstance(payload, dict) else {}


def _stored_trigger(data: Mapping[str, Any]) -> Trigger:
    """`_trigger_from_json`, shared by every stored schedule with the same trigger."""
    items = tuple(data.items())
    try:
        return _trigger_of(items)
    except TypeError:  # a list (active hours) is no cache key: a tuple is
        return _trigger_of(tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in items))


@functools.lru_cache(maxsize=4096)
def _trigger_of(items: tuple[tuple[str, Any], ...]) -> Trigger:
    return _trigger_from_json({k: list(v) if isinstance(v, tuple) else v for k, v in items})


_STORED_CONVERSIONS: dict[str, Callable[[Any], Any]] = {
    "trigger": _stored_trigger,
    "payload": _stored_payload,
    "start": _stored_instant,
    "end": _stored_instant,
    "overlap": _OVERLAPS.__getitem__,
    "catchup": _CATCHUPS.__getitem__,
    "catchup_window": _stored_duration,
    "time_limit": _stored_duration,
}
_STORED_FIELDS = tuple(  # name, the slot's own setter (frozen: __setattr__ refuses), conversion
    (f.name, getattr(Schedule, f.name).__set__, _STORED_CONVERSIONS.get(f.name))
    for f in dataclasses.fields(Schedule)
)


def _trigger_to_json(trigger: Trigger) -> dict[str, Any]:
    if isinstance(trigger, Cron):
        return {"kind": "cron", "expression": trigger.expression, "timezone": trigger.timezone}
    if isinstance(trigger, Heartbeat):
        hours = trigger.active_hours
        return {
            "kind": "heartbeat",
            "every": _seconds(trigger.every),
            "jitter": _seconds(trigger.jitter),
            "active_hours": [t.isoformat() for t in hours] if hours else None,
            "timezone": trigger.timezone,
        }
    return {"kind": "event"}


def _trigger_from_json(data: Mapping[str, Any]) -> Trigger:
    kind = data["kind"]
    if kind == "cron":
        return Cron(data["expression"], data.get("timezone", "UTC"))
    if kind == "heartbeat":
        hours = data.get("active_hours")
        return Heartbeat(
            every=timedelta(seconds=data["every"]),
            jitter=timedelta(seconds=data.get("jitter", 0)),
            active_hours=(time.fromisoformat(hours[0]), time.fromisoformat(hours[1]))
            if hours
            else None,
            timezone=data.get("timezone", "UTC"),
        )
    if kind == "event":
        return Event()
    raise DefinitionError("trigger", f"unknown trigger kind {kind!r}")
