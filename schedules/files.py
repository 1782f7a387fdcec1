"""Schedule definitions in files: TOML (`[[schedule]]` tables) or YAML (`schedules:`).

`load_path` reads one file or a folder and never raises for bad content: every
schedule that validates is returned, every problem becomes a `ScheduleError` naming
file, line, schedule and field, so one typo cannot stop the other schedules from
loading. The file format is documented in docs/schedules.md.

Example:
    >>> result = load_path("schedules/")
    >>> for error in result.errors:
    ...     print(error)  # schedules/nightly.toml:12: schedule 'digest': field 'cron': ...
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from schedules.definition import (
    ABBREVIATIONS,
    Catchup,
    Cron,
    DefinitionError,
    Event,
    Heartbeat,
    Overlap,
    Schedule,
    Trigger,
    abbreviation_problem,
)
from schedules.file_formats import FileProblem, RawSchedule, read_schedules

SUFFIXES = (".toml", ".yaml", ".yml")


@dataclass(frozen=True, slots=True)
class ScheduleError:
    """One problem in a schedule file; `str()` gives the line a user needs."""

    file: str
    line: int | None
    schedule: str | None
    field: str | None
    message: str

    def __str__(self) -> str:
        parts = [self.file if self.line is None else f"{self.file}:{self.line}"]
        if self.schedule is not None:
            parts.append(f"schedule {self.schedule!r}")
        if self.field is not None:
            parts.append(f"field {self.field!r}")
        parts.append(self.message)
        return ": ".join(parts)


@dataclass(frozen=True, slots=True)
class LoadResult:
    schedules: tuple[Schedule, ...]
    errors: tuple[ScheduleError, ...]
    skipped: tuple[str, ...] = ()  # files in the folder not read: not .toml/.yaml/.yml

    @property
    def ok(self) -> bool:
        return not self.errors


# --- durations and hours -------------------------------------------------------------

_UNIT_SECONDS = {
    unit: Decimal(seconds)
    for unit, seconds in (("w", 604_800), ("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1))
} | {"ms": Decimal("0.001")}
_UNIT_ORDER = list(_UNIT_SECONDS)
_DURATION_PART = re.compile(r"\s*(\d+(?:\.\d+)?|\.\d+)\s*(ms|w|d|h|m|s)")
_PLAIN_NUMBER = re.compile(r"^(\d+(?:\.\d+)?|\.\d+)$")
_DURATION_HELP = "use seconds or units w, d, h, m, s, ms, e.g. '90s', '5m', '1h30m', '2d', '1.5h'"


def parse_duration(text: str | int | float) -> timedelta:
    """`"1h30m"` -> `timedelta(hours=1, minutes=30)`; a bare number is seconds.

    Units go largest first, each at most once. Raises `ValueError` saying why.
    """
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise ValueError(f"invalid duration {text!r}: {_DURATION_HELP}")
    if isinstance(text, int | float):
        if not math.isfinite(text):
            raise ValueError(f"invalid duration {text!r}: must be a finite number")
        if text < 0:
            raise ValueError(f"invalid duration {text!r}: must not be negative")
        return _seconds(Decimal(str(text)), text)
    body = text.strip()
    if body.startswith("-"):
        raise ValueError(f"invalid duration {text!r}: must not be negative")
    if _PLAIN_NUMBER.match(body):  # "90", "1.5": seconds
        return _seconds(Decimal(body), text)
    total, position, last_unit = Decimal(0), 0, -1
    for match in _DURATION_PART.finditer(body):
        unit = _UNIT_ORDER.index(match.group(2))
        if match.start() != position or unit <= last_unit:
            break
        total += Decimal(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        position, last_unit = match.end(), unit
    if position != len(body) or not body:
        raise ValueError(f"invalid duration {text!r}: {_DURATION_HELP}")
    return _seconds(total, text)


def _seconds(value: Decimal, original: object) -> timedelta:
    if not value.is_finite() or value < 0:
        raise ValueError(f"invalid duration {original!r}: must not be negative")
    try:
        return timedelta(microseconds=int(value * 1_000_000))
    except OverflowError:
        raise ValueError(f"invalid duration {original!r}: too long") from None


_HOURS = re.compile(r"^\s*(\d{1,2}):(\d{2})(?::(\d{2}))?\s*-\s*(\d{1,2}):(\d{2})(?::(\d{2}))?\s*$")


def parse_active_hours(text: str) -> tuple[time, time]:
    """`"08:00-18:00"` -> (08:00, 18:00); wraps midnight if the end is earlier
    (`"22:00-06:00"`); `"24:00"` is allowed as an end."""
    match = _HOURS.match(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"invalid active_hours {text!r}: use 'HH:MM-HH:MM', e.g. '08:00-18:00'")
    h1, m1, s1, h2, m2, s2 = (int(g or 0) for g in match.groups())
    if (h2, m2, s2) == (24, 0, 0):
        h2 = 0
    try:
        return time(h1, m1, s1), time(h2, m2, s2)
    except ValueError as exc:
        raise ValueError(f"invalid active_hours {text!r}: {exc}") from None


# --- the file model ---------------------------------------------------------------


class _Entry(BaseModel):
    """One schedule as written in a file; untrusted, hence strict."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: str
    agent: str
    tenant: str
    user: str = ""
    goal: str = ""
    payload: dict[str, Any] = Field(default_factory=dict)
    cron: str | None = None
    heartbeat: timedelta | None = None
    event: bool | None = None
    timezone: str | None = None
    jitter: timedelta | None = None
    active_hours: tuple[time, time] | None = None
    start: datetime | None = None
    end: datetime | None = None
    max_runs: int | None = None
    paused: bool = False
    pause_note: str = ""
    overlap: str | None = None
    catchup: str | None = None
    catchup_window: timedelta | None = None
    time_limit: timedelta | None = None
    retries: int = 0

    @field_validator("heartbeat", "jitter", "catchup_window", "time_limit", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return value if value is None else parse_duration(value)

    @field_validator("active_hours", mode="before")
    @classmethod
    def _hours(cls, value: Any) -> Any:
        return value if value is None else parse_active_hours(value)

    @field_validator("start", "end", mode="before")
    @classmethod
    def _datetime(cls, value: Any) -> Any:
        if value is None or isinstance(value, datetime):
            return value
        example = "use ISO 8601 with a UTC offset, e.g. 2025-01-01T08:00:00+01:00"
        if isinstance(value, date):
            raise ValueError(f"{value.isoformat()} is a date; {example}")
        try:
            return datetime.fromisoformat(value)
        except (TypeError, ValueError):
            raise ValueError(f"invalid date-time {value!r}: {example}") from None


_FIELDS = tuple(_Entry.model_fields)
_RECORD_TO_FILE = {"expression": "cron", "every": "heartbeat"}


class _Invalid(Exception):
    def __init__(self, field: str | None, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


def _triggers_given(entry: _Entry) -> list[str]:
    return [
        name
        for name, value in (
            ("cron", entry.cron),
            ("heartbeat", entry.heartbeat),
            ("event", entry.event),
        )
        if value not in (None, False)
    ]


def _trigger(entry: _Entry) -> Trigger:
    given = _triggers_given(entry)
    if len(given) != 1:
        found = f"found {' and '.join(given)}" if given else "found none"
        raise _Invalid(
            given[1] if len(given) > 1 else None,
            f"give exactly one of cron, heartbeat or event = true ({found})",
        )
    if entry.heartbeat is None:
        for name in ("jitter", "active_hours"):
            if getattr(entry, name) is not None:
                raise _Invalid(name, f"{name} applies only to heartbeat schedules")
    zone = "UTC" if entry.timezone is None else entry.timezone
    if zone in ABBREVIATIONS:  # tzdata has CET, EST …; new definitions name a region
        raise _Invalid("timezone", abbreviation_problem(zone))
    if entry.cron is not None:
        return Cron(entry.cron, zone)
    if entry.heartbeat is not None:
        jitter = timedelta(0) if entry.jitter is None else entry.jitter
        return Heartbeat(entry.heartbeat, jitter, entry.active_hours, zone)
    if entry.timezone is not None:
        raise _Invalid("timezone", "an event schedule has no timer, so no time zone")
    return Event()


def _build(entry: _Entry, source: str) -> Schedule:
    try:
        trigger = _trigger(entry)
        optional = {
            name: getattr(entry, name)
            for name in ("start", "end", "max_runs", "overlap", "catchup")
            + ("catchup_window", "time_limit")
            if getattr(entry, name) is not None
        }
        schedule = Schedule(
            name=entry.name,
            agent=entry.agent,
            tenant=entry.tenant,
            trigger=trigger,
            user=entry.user,
            goal=entry.goal,
            payload=entry.payload,
            paused=entry.paused,
            pause_note=entry.pause_note,
            retries=entry.retries,
            source=source,
            **optional,
        )
    except DefinitionError as exc:
        raise _Invalid(_RECORD_TO_FILE.get(exc.field, exc.field), str(exc)) from None
    _check_catchup_all(schedule, overlap_given=entry.overlap is not None)
    return schedule


def _check_catchup_all(schedule: Schedule, *, overlap_given: bool) -> None:
    """`catchup = "all"` promises every missed fire a run, and the missed fires are
    due together: any overlap policy but `allow_all` lets the first run and drops
    (or buffers one of, or cancels for) the others. A file asking for both is
    refused rather than keeping one promise silently; a schedule stored before this
    check keeps firing as it did (the beat does not re-check it)."""
    if schedule.catchup is not Catchup.ALL or schedule.overlap is Overlap.ALLOW_ALL:
        return
    default = "" if overlap_given else " (the default)"
    raise _Invalid(
        "catchup",
        f"catchup 'all' runs every missed fire, but with overlap '{schedule.overlap}'"
        f"{default} the missed fires, due together, find the first one's run still going "
        "and all but one would not run: set overlap = 'allow_all' to run them all at "
        "once, or catchup = 'latest' to run only the newest",
    )


def _validation_problems(exc: ValidationError) -> Iterator[tuple[str | None, str]]:
    for error in exc.errors(include_url=False):
        loc = error["loc"]
        name = str(loc[0]) if loc else None
        cause = error.get("ctx", {}).get("error")
        if error["type"] == "extra_forbidden":
            hint = difflib.get_close_matches(str(name), _FIELDS, n=1)
            yield name, f"unknown field{f'; did you mean {hint[0]!r}?' if hint else ''}"
        elif error["type"] == "missing":
            yield name, "required field is missing"
        elif isinstance(cause, Exception):
            yield name, str(cause)
        else:
            inner = ".".join(str(part) for part in loc[1:])
            yield name, f"{inner}: {error['msg']}" if inner else error["msg"]


# --- loading ----------------------------------------------------------------------


Problem = tuple[str | None, str]  # (field, message)

# What a faulty field is set to so that the rest of a schedule can still be checked.
_STAND_INS: dict[str, Any] = {
    "name": "x",
    "agent": "x",
    "tenant": "x",
    "cron": "* * * * *",
    "heartbeat": timedelta(hours=1),
}


def _stand_in(field: str) -> Any:
    if field in _STAND_INS:
        return _STAND_INS[field]
    return _Entry.model_fields[field].get_default(call_default_factory=True)


def _checked_entry(data: dict[str, Any]) -> tuple[_Entry | None, list[Problem]]:
    """The entry with every field-level problem; faulty fields are left out (or
    stood in for) on a second pass, so rules across fields can still be checked."""
    try:
        return _Entry.model_validate(data), []
    except ValidationError as exc:
        problems = list(_validation_problems(exc))
    faulty = {field for field, _ in problems}
    rest = {k: v for k, v in data.items() if k not in faulty}
    rest |= {f: _STAND_INS[f] for f in faulty if f in _STAND_INS}
    try:
        return _Entry.model_validate(rest), problems
    except ValidationError:
        return None, problems


def _built(entry: _Entry, source: str) -> tuple[Schedule | None, list[Problem]]:
    """`_build`, reporting every rule a schedule breaks, not only the first.

    A `Schedule` stops at its first problem; rather than restate each rule here, the
    faulty field is set to a neutral value and the schedule built again, until it
    builds or a problem cannot be set aside."""
    problems: list[Problem] = []
    for _ in range(len(_FIELDS) + 1):
        try:
            return _build(entry, source), problems
        except _Invalid as exc:
            if (exc.field, exc.message) in problems:
                break
            problems.append((exc.field, exc.message))
            field = exc.field
        if field is None:  # no trigger at all
            entry = entry.model_copy(update={"event": True})
        elif len(_triggers_given(entry)) > 1:  # one trigger too many: drop it
            entry = entry.model_copy(update={field: None})
        elif field in _FIELDS:
            entry = entry.model_copy(update={field: _stand_in(field)})
        else:
            break
    return None, problems


def _load_entry(raw: RawSchedule, label: str) -> Schedule | list[ScheduleError]:
    data = raw.data
    name = data.get("name") if isinstance(data, dict) else None
    name = name if isinstance(name, str) else None

    def error(field: str | None, message: str) -> ScheduleError:
        line = raw.field_lines.get(field, raw.line) if field else raw.line
        return ScheduleError(label, line, name, field, message)

    if raw.problem is not None:
        return [error(*raw.problem)]
    if not isinstance(data, dict):
        return [error(None, f"a schedule must be a table of fields, got {type(data).__name__}")]
    entry, problems = _checked_entry(data)
    schedule = None
    if entry is not None:
        schedule, more = _built(entry, label if raw.line is None else f"{label}:{raw.line}")
        problems += more
    if problems or schedule is None:
        errors = [error(field, message) for field, message in problems]
        return sorted(errors, key=lambda e: e.line or 0)  # in the order they are written
    return schedule


def _files_under(folder: Path) -> tuple[list[Path], list[Path]]:
    """Schedule files below `folder` and the other files there (not read), both
    sorted; hidden files and folders are neither."""
    found: list[Path] = []
    skipped: list[Path] = []
    for parent, folders, names in os.walk(folder):
        folders[:] = [d for d in folders if not d.startswith(".")]
        for name in names:
            if not name.startswith("."):
                (found if name.lower().endswith(SUFFIXES) else skipped).append(Path(parent, name))

    def order(path: Path) -> tuple[str, ...]:
        return path.relative_to(folder).parts

    return sorted(found, key=order), sorted(skipped, key=order)


def load_path(path: str | Path) -> LoadResult:
    """Load every schedule from a file, or from a folder recursively.

    Schedule names are global: a name given twice (in one file or two) is an error on
    each later definition naming the first, and no definition of that name is
    returned, so applying the result leaves the stored schedule as it is. Never raises
    for content.
    """
    root = Path(path)
    skipped: list[Path] = []
    if root.is_dir():
        files, skipped = _files_under(root)
    elif root.is_file() and root.suffix.lower() in SUFFIXES:
        files = [root]
    else:
        problem = (
            "unsupported file type (use .toml, .yaml or .yml)"
            if root.is_file()
            else ("no such file or folder")
        )
        return LoadResult((), (ScheduleError(str(path), None, None, None, problem),))
    schedules: list[Schedule] = []
    errors: list[ScheduleError] = []
    first_at: dict[str, str] = {}
    repeated: set[str | None] = set()
    for file in files:
        label = str(file)
        try:
            entries = read_schedules(file)
        except FileProblem as exc:
            errors.append(ScheduleError(label, exc.line, None, None, exc.message))
            continue
        for raw in entries:
            loaded = _load_entry(raw, label)
            again = _repeated_name(raw, label, first_at)
            if again is not None:
                errors.append(again)
                repeated.add(again.schedule)
            if isinstance(loaded, list):
                errors.extend(loaded)
            else:
                schedules.append(loaded)
    kept = tuple(s for s in schedules if s.name not in repeated)
    return LoadResult(kept, tuple(errors), tuple(str(p) for p in skipped))


def _repeated_name(raw: RawSchedule, label: str, first_at: dict[str, str]) -> ScheduleError | None:
    """An error for a name some earlier entry (valid or not) already has, naming both
    places; the caller then applies no definition of that name, so the stored
    schedule stays exactly as it was rather than taking whichever came first."""
    name = raw.data.get("name") if isinstance(raw.data, dict) else None
    if not isinstance(name, str):
        return None
    line = raw.field_lines.get("name", raw.line)
    here = label if line is None else f"{label}:{line}"
    if name not in first_at:
        first_at[name] = here
        return None
    message = (
        f"defined twice, here and at {first_at[name]}; neither definition is applied and the stored "
        f"schedule {name!r}, if any, is left as it is: rename or remove one"
    )
    return ScheduleError(label, line, name, "name", message)
