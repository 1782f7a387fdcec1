"""Schedule records and schedule files: validation, storage form, hostile input."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from textwrap import dedent
from typing import Any

import pytest

from schedules.definition import (
    SCOPE_CHARS,
    Catchup,
    Cron,
    DefinitionError,
    Event,
    Heartbeat,
    Overlap,
    Schedule,
)
from schedules.files import (
    LoadResult,
    ScheduleError,
    load_path,
    parse_active_hours,
    parse_duration,
)
from workers.tables import runs

T0 = datetime(2025, 1, 1, tzinfo=UTC)


def make(**changes: Any) -> Schedule:
    values: dict[str, Any] = {
        "name": "digest",
        "agent": "mailer",
        "tenant": "acme",
        "trigger": Cron("0 7 * * *"),
    }
    return Schedule(**(values | changes))


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def only_error(result: LoadResult) -> ScheduleError:
    assert len(result.errors) == 1, [str(e) for e in result.errors]
    return result.errors[0]


# --- records ----------------------------------------------------------------------


def test_schedule_defaults_and_kind() -> None:
    schedule = make()

    assert schedule.overlap is Overlap.SKIP
    assert schedule.catchup is Catchup.LATEST
    assert schedule.catchup_window == timedelta(minutes=5)
    assert schedule.time_limit == timedelta(minutes=10)
    assert (schedule.kind, make(trigger=Event()).kind) == ("cron", "event")
    assert make(trigger=Heartbeat(timedelta(minutes=5))).kind == "heartbeat"
    assert make(overlap="allow_all").overlap is Overlap.ALLOW_ALL
    assert hash(schedule) == hash(make())


@pytest.mark.parametrize(
    "trigger",
    [
        Cron("*/5 * * * * 30", "Europe/Berlin"),
        Heartbeat(
            timedelta(minutes=30, microseconds=7),
            timedelta(seconds=12.5),
            (time(8), time(18, 30)),
            "Australia/Sydney",
        ),
        Event(),
    ],
)
def test_json_round_trip(trigger: Cron | Heartbeat | Event) -> None:
    schedule = make(
        trigger=trigger,
        user="ana",
        goal="Summarise the night",
        payload={"lists": [1, 2, {"x": None}], "ü": "ß"},
        start=datetime(2025, 1, 1, 8, tzinfo=UTC) + timedelta(microseconds=5),
        end=datetime.fromisoformat("2026-01-01T00:00:00+01:00"),
        max_runs=3,
        paused=True,
        pause_note="holidays",
        overlap=Overlap.CANCEL_OTHER,
        catchup=Catchup.ALL,
        catchup_window=timedelta(seconds=1.25),
        time_limit=timedelta(hours=2),
        retries=2,
        source="schedules/nightly.toml:3",
    )

    stored = json.loads(json.dumps(schedule.to_json()))

    assert Schedule.from_json(stored) == schedule
    assert Schedule.from_json(stored).fingerprint() == schedule.fingerprint()


def test_fingerprint_ignores_source_but_sees_every_setting() -> None:
    base = make(source="a.toml:1")

    assert make(source="b.yaml:9").fingerprint() == base.fingerprint()
    changed = [
        make(paused=True),
        make(pause_note="x"),
        make(trigger=Cron("0 8 * * *")),
        make(trigger=Cron("0 7 * * *", "Europe/Berlin")),
        make(payload={"k": 1}),
        make(retries=1),
        make(catchup=Catchup.NONE),
    ]
    assert len({s.fingerprint() for s in changed} | {base.fingerprint()}) == len(changed) + 1


def test_payload_is_copied_to_plain_json() -> None:
    original: dict[str, Any] = {"items": (1, 2)}
    schedule = make(payload=original)
    original["items"] = (3,)

    assert schedule.payload == {"items": [1, 2]}


def test_a_payload_nested_past_the_limit_names_the_field() -> None:
    payload: dict[str, Any] = {"leaf": 1}
    for _ in range(5_000):  # past Python's recursion limit: no RecursionError escapes
        payload = {"a": payload}
    with pytest.raises(DefinitionError, match="nests deeper than 64 levels") as caught:
        make(payload=payload)
    assert caught.value.field == "payload"


RECORD_ERRORS = [
    (lambda: Cron("61 * * * *"), "expression", "invalid cron expression '61 * * * *': minute must be 0-59"),
    (lambda: Cron("0 24 * * *"), "expression", "hour must be 0-23"),
    (lambda: Cron("0 0 32 * *"), "expression", "day-of-month must be 1-31"),
    (lambda: Cron("0 0 * 13 *"), "expression", "month must be 1-12"),
    (lambda: Cron("0 0 * * 8"), "expression", "day-of-week must be 0-7"),
    (lambda: Cron("0 0 * * * 60"), "expression", "second must be 0-59"),
    (lambda: Cron("*/0 * * * *"), "expression", "minute step must be a positive whole number"),
    (lambda: Cron("0 0 * * * 0 2025"), "expression", "expected 5 fields"),
    (lambda: Cron("0 0 *"), "expression", "got 3"),
    (lambda: Cron(""), "expression", "cron expression is empty"),
    (lambda: Cron("@reboot"), "expression", "unknown cron alias '@reboot'"),
    (lambda: Cron("0 0 30 2 *"), "expression", "no date ever matches it"),
    (lambda: Cron("H * * * *"), "expression", "hashed/random values"),
    (lambda: Cron("R * * * *"), "expression", "hashed/random values"),
    (lambda: Cron("banana * * * *"), "expression", "invalid cron expression 'banana * * * *'"),
    (lambda: Cron("@daily", "Mars/Olympus"), "timezone", "unknown time zone 'Mars/Olympus'"),
    (lambda: Cron("@daily", "Europe/Berln"), "timezone", "did you mean 'Europe/Berlin'?"),
    (lambda: Cron("@daily", "localtime"), "timezone", "unknown time zone 'localtime'"),
    (lambda: Heartbeat(timedelta(0)), "every", "heartbeat interval must be at least 1s, got 0s"),
    (lambda: Heartbeat(timedelta(seconds=-5)), "every", "heartbeat interval must be at least 1s, got -5s"),
    (lambda: Heartbeat(timedelta(milliseconds=500)), "every", "at least 1s, got 0.5s"),
    (lambda: Heartbeat(timedelta(minutes=30), timedelta(minutes=30)), "jitter",
     "jitter 30m must be shorter than the interval 30m"),
    (lambda: Heartbeat(timedelta(minutes=30), timedelta(seconds=-1)), "jitter", "must not be negative"),
    (lambda: Heartbeat(timedelta(minutes=1), active_hours=(time(8), time(8))), "active_hours",
     "08:00-08:00 is empty"),
    (lambda: Heartbeat(timedelta(minutes=1), active_hours=(time(8, tzinfo=UTC), time(9))),
     "active_hours", "without time zone"),
    (lambda: Heartbeat(timedelta(minutes=1), timezone="Nowhere"), "timezone", "unknown time zone"),
    (lambda: make(name="has space"), "name", "schedule name 'has space' is invalid"),
    (lambda: make(name="a@b"), "name", "is invalid"),
    (lambda: make(name=".hidden"), "name", "is invalid"),
    (lambda: make(name="x" * 129), "name", "is invalid"),
    (lambda: make(agent=""), "agent", "agent must not be empty"),
    (lambda: make(tenant="  "), "tenant", "tenant must not be empty"),
    (lambda: make(trigger="0 * * * *"), "trigger", "trigger must be Cron, Heartbeat or Event"),
    (lambda: make(start=datetime(2025, 1, 1)), "start", "has no UTC offset"),
    (lambda: make(end=datetime(2025, 1, 1)), "end", "has no UTC offset"),
    (lambda: make(start=T0, end=T0), "end", "must be after start"),
    (lambda: make(start=T0, end=T0 - timedelta(days=1)), "end", "must be after start"),
    (lambda: make(retries=-1), "retries", "retries must be a whole number >= 0"),
    (lambda: make(max_runs=0), "max_runs", "max_runs must be a whole number >= 1"),
    (lambda: make(max_runs=True), "max_runs", "whole number"),
    (lambda: make(overlap="queue"), "overlap", "overlap must be one of skip, buffer_one"),
    (lambda: make(catchup="some"), "catchup", "catchup must be one of none, latest, all"),
    (lambda: make(catchup_window=timedelta(seconds=-1)), "catchup_window", "must not be negative"),
    (lambda: make(time_limit=timedelta(0)), "time_limit", "time_limit must be positive"),
    (lambda: make(payload={"s": {1, 2}}), "payload", "JSON-serialisable"),
    (lambda: make(payload={"n": float("nan")}), "payload", "JSON-serialisable"),
    (lambda: make(payload={1: "x"}), "payload", "keys must be strings"),
    (lambda: make(payload={"big": "x" * 70_000}), "payload", "larger than 64 KiB"),
    (lambda: make(user="ana\x00"), "user", "user holds a NUL character (U+0000) at character 4"),
    (lambda: make(tenant="ac\x1bme"), "tenant", "tenant holds a control character (U+001B)"),
    (lambda: make(agent="mail\ner"), "agent", "one line: no control characters"),
    (lambda: make(pause_note="a\tb"), "pause_note", "not even tab or newline"),
    (lambda: make(goal="sum\x07up"), "goal", "tab and newline are the only control characters"),
    (lambda: make(goal="a\rb"), "goal", "control character (U+000D)"),
    (lambda: make(goal="\x85"), "goal", "control character (U+0085)"),
    (lambda: make(goal="\ud800"), "goal", "a lone surrogate (not UTF-8) (U+D800)"),
    (lambda: make(payload={"mail": {"folders": ["ok", "IN\x00BOX"]}}), "payload",
     "payload['mail']['folders'][1] holds a NUL character (U+0000) at character 3"),
    (lambda: make(payload={"mail": {"fol\x00der": 1}}), "payload",
     "a key in payload['mail'] holds a NUL character"),
]  # fmt: skip


@pytest.mark.parametrize(("build", "field", "message"), RECORD_ERRORS)
def test_records_refuse_invalid_definitions(build: Any, field: str, message: str) -> None:
    with pytest.raises(DefinitionError, match=None) as caught:
        build()

    assert isinstance(caught.value, ValueError)
    assert caught.value.field == field
    assert message in str(caught.value)


def test_multi_line_text_may_hold_tabs_and_newlines() -> None:
    schedule = make(goal="Summarise:\n\t- mail", payload={"body": "Hi,\n\tthanks"})

    assert schedule.goal == "Summarise:\n\t- mail"
    assert schedule.payload == {"body": "Hi,\n\tthanks"}


def test_a_refused_character_never_quotes_the_text() -> None:
    with pytest.raises(DefinitionError) as caught:
        make(payload={"password": "hunter\x002"})

    assert "hunter" not in str(caught.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "x", "agent": "a", "tenant": "t", "trigger": {"kind": "cron"}}, "malformed"),
        ({"name": "x", "agent": "a", "tenant": "t", "trigger": {"kind": "sms"}}, "unknown trigger"),
        ({"name": "x", "agent": "a", "tenant": "t"}, "malformed"),
        ({**make().to_json(), "colour": "red"}, "unknown schedule key(s): colour"),
        ({**make().to_json(), "start": "yesterday"}, "malformed"),
    ],
)
def test_from_json_refuses_malformed_data(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Schedule.from_json(data)


# --- durations and hours ----------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("5m", timedelta(minutes=5)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("1h 30m", timedelta(hours=1, minutes=30)),
        ("2d", timedelta(days=2)),
        ("1w2d", timedelta(days=9)),
        ("1.5h", timedelta(minutes=90)),
        ("250ms", timedelta(milliseconds=250)),
        ("0s", timedelta(0)),
        ("90", timedelta(seconds=90)),
        ("0.5", timedelta(milliseconds=500)),
        (45, timedelta(seconds=45)),
        (1.5, timedelta(seconds=1.5)),
    ],
)
def test_parse_duration(text: str | int | float, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text", ["", "x", "5 minutes", "30m1h", "1m30m", "-5s", "1e3", "1M", "5m-", -1,
             float("inf"), float("nan"), True, None, "99999999999d"],
)  # fmt: skip
def test_parse_duration_refuses_nonsense(text: Any) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("08:00-18:00", (time(8), time(18))),
        ("8:30 - 17:45", (time(8, 30), time(17, 45))),
        ("22:00-06:00", (time(22), time(6))),
        ("08:00-24:00", (time(8), time(0))),
        ("08:00:30-09:00:00", (time(8, 0, 30), time(9))),
    ],
)
def test_parse_active_hours(text: str, expected: tuple[time, time]) -> None:
    assert parse_active_hours(text) == expected


@pytest.mark.parametrize("text", ["8-18", "08:00", "25:00-26:00", "08:60-09:00", "24:00-08:00"])
def test_parse_active_hours_refuses_nonsense(text: str) -> None:
    with pytest.raises(ValueError, match="invalid active_hours"):
        parse_active_hours(text)


# --- files ------------------------------------------------------------------------

GOOD_TOML = """
# Nightly jobs for acme.
[[schedule]]
name = "digest"
agent = "mailer"
tenant = "acme"
user = "ana"
goal = "Summarise yesterday's mail"
cron = "0 7 * * mon-fri"
timezone = "Europe/Berlin"
start = 2025-01-01T00:00:00+01:00
end = 2026-01-01T00:00:00Z
max_runs = 100
overlap = "allow_all"
catchup = "all"
catchup_window = "1h"
time_limit = "15m"
retries = 2

[schedule.payload]
folder = "INBOX"
limit = 50

[[schedule]]
name = "pulse"
agent = "watcher"
tenant = "acme"
heartbeat = "5m"
jitter = "30s"
active_hours = "08:00-18:00"
timezone = "America/New_York"
paused = true
pause_note = "until the feed is fixed"

[[schedule]]
name = "on-mail"
agent = "triage"
tenant = "acme"
event = true
"""


def test_loads_a_good_toml_file(tmp_path: Path) -> None:
    path = write(tmp_path, "nightly.toml", GOOD_TOML)

    result = load_path(path)

    assert result.errors == ()
    digest, pulse, on_mail = result.schedules
    assert digest == Schedule(
        name="digest",
        agent="mailer",
        tenant="acme",
        user="ana",
        goal="Summarise yesterday's mail",
        trigger=Cron("0 7 * * mon-fri", "Europe/Berlin"),
        payload={"folder": "INBOX", "limit": 50},
        start=datetime.fromisoformat("2025-01-01T00:00:00+01:00"),
        end=datetime(2026, 1, 1, tzinfo=UTC),
        max_runs=100,
        overlap=Overlap.ALLOW_ALL,
        catchup=Catchup.ALL,
        catchup_window=timedelta(hours=1),
        time_limit=timedelta(minutes=15),
        retries=2,
        source=f"{path}:2",
    )
    assert pulse.trigger == Heartbeat(
        timedelta(minutes=5), timedelta(seconds=30), (time(8), time(18)), "America/New_York"
    )
    assert (pulse.paused, pulse.pause_note, pulse.source) == (
        True,
        "until the feed is fixed",
        f"{path}:23",
    )
    assert on_mail.trigger == Event()
    assert on_mail.source == f"{path}:34"


GOOD_YAML = """
schedules:
  - name: digest
    agent: mailer
    tenant: acme
    cron: "0 7 * * mon-fri"
    timezone: Europe/Berlin
    start: 2025-01-01T00:00:00+01:00
    payload:
      folder: INBOX
  - name: pulse
    agent: watcher
    tenant: acme
    heartbeat: 90
    active_hours: "22:00-06:00"
  - name: on-mail
    agent: triage
    tenant: acme
    event: true
"""


@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_loads_a_good_yaml_file(tmp_path: Path, suffix: str) -> None:
    path = write(tmp_path, f"nightly{suffix}", GOOD_YAML)

    result = load_path(path)

    assert result.errors == ()
    digest, pulse, on_mail = result.schedules
    assert digest.trigger == Cron("0 7 * * mon-fri", "Europe/Berlin")
    assert digest.start == datetime.fromisoformat("2025-01-01T00:00:00+01:00")
    assert digest.payload == {"folder": "INBOX"}
    assert pulse.trigger == Heartbeat(timedelta(seconds=90), active_hours=(time(22), time(6)))
    assert [s.source for s in result.schedules] == [f"{path}:2", f"{path}:10", f"{path}:15"]
    assert on_mail.kind == "event"


def test_yaml_may_hold_a_single_schedule_mapping(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "one.yaml",
        """
        name: solo
        agent: a
        tenant: t
        cron: "@daily"
        """,
    )

    result = load_path(path)

    assert [s.name for s in result.schedules] == ["solo"]
    assert result.schedules[0].source == f"{path}:1"


def test_error_names_file_line_schedule_and_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = (
        "\n" * 7 + "[[schedule]]\nname = 'digest'\nagent = 'a'\ntenant = 't'\ncron = '61 * * * *'\n"
    )
    (tmp_path / "schedules").mkdir()
    (tmp_path / "schedules" / "nightly.toml").write_text(body, encoding="utf-8")
    monkeypatch.chdir(tmp_path)

    error = only_error(load_path("schedules"))

    assert str(error) == (
        "schedules/nightly.toml:12: schedule 'digest': field 'cron': "
        "invalid cron expression '61 * * * *': minute must be 0-59"
    )
    assert (error.file, error.line, error.schedule, error.field) == (
        "schedules/nightly.toml",
        12,
        "digest",
        "cron",
    )


def test_one_bad_schedule_does_not_stop_the_others(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "mixed.toml",
        """
        [[schedule]]
        name = "first"
        agent = "a"
        tenant = "t"
        cron = "@hourly"

        [[schedule]]
        name = "broken"
        agent = "a"
        tenant = "t"
        cron = "0 0 * * * * *"

        [[schedule]]
        name = "last"
        agent = "a"
        tenant = "t"
        heartbeat = "1h30m"
        """,
    )

    result = load_path(path)

    assert [s.name for s in result.schedules] == ["first", "last"]
    error = only_error(result)
    assert (error.line, error.schedule, error.field) == (11, "broken", "cron")
    assert "expected 5 fields" in error.message


HOSTILE_TOML = [
    ('name = "x"\nagent = "a"\ntenant = "t"\ncron = "@daily"\ncronn = "@daily"\n',
     5, "cronn", "unknown field; did you mean 'cron'?"),
    ('name = "x"\nagent = "a"\ntenant = "t"\ncron = "@daily"\ntimezone = "Europe/Berln"\n',
     5, "timezone", "unknown time zone 'Europe/Berln'; did you mean 'Europe/Berlin'?"),
    ('name = "x"\nagent = "a"\ntenant = "t"\nheartbeat = "30m"\njitter = "30m"\n',
     5, "jitter", "jitter 30m must be shorter than the interval 30m"),
    ('name = "x"\nagent = "a"\ntenant = "t"\ncron = "@daily"\nstart = 2025-01-01T08:00:00\n',
     5, "start", "has no UTC offset"),
    ('name = "x"\nagent = "a"\ntenant = "t"\ncron = "@daily"\nstart = 2025-01-01\n',
     5, "start", "is a date"),
    ('name = "x"\nagent = "a"\ntenant = "t"\ncron = "@daily"\nend = "next week"\n',
     5, "end", "invalid date-time 'next week'"),
    ('name = "x"\nagent = "a"\ntenant = "t"\ncron = "@daily"\nheartbeat = 60\n',
     5, "heartbeat", "give exactly one of cron, heartbeat or event = true (found cron and heartbeat)"),
    ('name = "x"\nagent = "a"\ntenant = "t"\n',
     0, None, "give exactly one of cron, heartbeat or event = true (found none)"),
    ('name = "x"\nagent = "a"\ntenant = "t"\nevent = false\n',
     0, None, "found none"),
    ('name = "x"\nagent = "a"\ntenant = "t"\ncron = "@daily"\njitter = "5s"\n',
     5, "jitter", "jitter applies only to heartbeat schedules"),
    ('name = "x"\nagent = "a"\ntenant = "t"\nevent = true\ntimezone = "UTC"\n',
     5, "timezone", "an event schedule has no timer"),
    ('name = "x"\nagent = "a"\ntenant = "t"\nheartbeat = "soon"\n',
     4, "heartbeat", "invalid duration 'soon'"),
    ('name = "x"\nagent = "a"\ntenant = "t"\nheartbeat = "1m"\nactive_hours = "9-5"\n',
     5, "active_hours", "invalid active_hours '9-5'"),
    ('name = "x"\nagent = "a"\ntenant = "t"\ncron = "@daily"\nretries = "2"\n',
     5, "retries", "Input should be a valid integer"),
    ('name = "x"\nagent = "a"\ntenant = "t"\ncron = "@daily"\nretries = -1\n',
     5, "retries", "retries must be a whole number >= 0"),
    ('name = "x"\nagent = "a"\ntenant = "t"\ncron = "@daily"\noverlap = "queue"\n',
     5, "overlap", "overlap must be one of skip, buffer_one, allow_all, cancel_other"),
    ('name = "x y"\nagent = "a"\ntenant = "t"\ncron = "@daily"\n',
     1, "name", "schedule name 'x y' is invalid"),
    ('name = "x"\ntenant = "t"\ncron = "@daily"\n',
     0, "agent", "required field is missing"),
    ('name = "x"\nagent = "a"\ntenant = "t"\ncron = "@daily"\n[schedule.payload]\nf = 1.5\nn = nan\n',
     5, "payload", "JSON-serialisable"),
    ('name = "x"\nagent = "a"\ntenant = "t"\ncron = "@daily"\ncatchup = "all"\n',
     5, "catchup", "with overlap 'skip' (the default) the missed fires"),
    ('name = "x"\nagent = "a"\ntenant = "t"\ncron = "@daily"\ncatchup = "all"\noverlap = "buffer_one"\n',
     5, "catchup", "set overlap = 'allow_all' to run them all at once, or catchup = 'latest'"),
    ('name = "x"\nagent = "a"\ntenant = "t"\nuser = "a\\u0000b"\ncron = "@daily"\n',
     4, "user", "user holds a NUL character (U+0000) at character 2"),
    ('name = "x"\nagent = "a"\ntenant = "t"\ncron = "@daily"\npaused = true\npause_note = "db\\u0000"\n',
     6, "pause_note", "pause_note holds a NUL character"),
    ('name = "x"\nagent = "a"\ntenant = "t\\u001b[2J"\ncron = "@daily"\n',
     3, "tenant", "tenant holds a control character (U+001B)"),
    ('name = "x"\nagent = "a"\ntenant = "t"\ngoal = "go\\u0000"\ncron = "@daily"\n',
     4, "goal", "goal holds a NUL character"),
    ('name = "x"\nagent = "a"\ntenant = "t"\ncron = "@daily"\n[schedule.payload]\nfolder = "IN\\u0000BOX"\n',
     5, "payload", "payload['folder'] holds a NUL character (U+0000) at character 3"),
]  # fmt: skip


@pytest.mark.parametrize(("body", "line", "field", "message"), HOSTILE_TOML)
def test_hostile_toml_schedules(
    tmp_path: Path, body: str, line: int, field: str | None, message: str
) -> None:
    path = write(tmp_path, "bad.toml", "[[schedule]]\n" + body)

    result = load_path(path)

    assert result.schedules == ()
    error = only_error(result)
    # Lines count within `body`; the [[schedule]] header above it is line 1.
    assert (error.file, error.line, error.field) == (str(path), line + 1, field)
    assert message in error.message
    assert error.schedule == ("x y" if field == "name" else "x")


def test_several_problems_in_one_schedule_are_all_reported(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.toml", '[[schedule]]\nname = "x"\ncolour = "red"\nretries = "2"\n')

    result = load_path(path)

    assert {(e.field, e.line) for e in result.errors} == {
        ("agent", 1),
        ("tenant", 1),
        ("colour", 3),
        ("retries", 4),
        (None, 1),  # and no trigger: also said, not left for the next attempt
    }


def test_every_rule_a_schedule_breaks_is_reported_with_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bad.yaml",
        """
        schedules:
          - name: pulse
            agent: a
            tenant: t
            heartbeat: 0s
            jitter: -1s
            timezone: Mars/Olympus
            active_hours: "08:00-08:00"
            overlap: sometimes
            max_runs: 0
            start: 2026-01-02T00:00:00Z
            end: 2026-01-01T00:00:00Z
            retries: many
        """,
    )

    result = load_path(path)

    assert result.schedules == ()
    assert [(e.line, e.field) for e in result.errors] == [
        (5, "heartbeat"),
        (6, "jitter"),
        (7, "timezone"),
        (8, "active_hours"),
        (9, "overlap"),
        (10, "max_runs"),
        (12, "end"),
        (13, "retries"),
    ]
    assert all(
        str(e).startswith(f"{path}:{e.line}: schedule 'pulse': field ") for e in result.errors
    )


def test_a_bad_cron_and_a_second_trigger_are_both_reported(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "two.toml",
        '[[schedule]]\nname = "x"\nagent = "a"\ntenant = "t"\ncron = "61 * * * *"\n'
        'heartbeat = "5m"\ntimezone = "CET"\novrlap = "skip"\n',
    )

    result = load_path(path)

    assert {(e.line, e.field) for e in result.errors} == {
        (8, "ovrlap"),
        (7, "timezone"),
        (6, "heartbeat"),
        (5, "cron"),
    }


@pytest.mark.parametrize(
    ("name", "text", "line", "message"),
    [
        ("syntax.toml", '[[schedule]]\nname = "x"\nagent = \n', 3, "TOML syntax error"),
        ("unclosed.toml", '[[schedule]\nname = "x"\n', 1, "TOML syntax error"),
        ("dupe.toml", 'name = "x"\nname = "y"\n', 2, "TOML syntax error"),
        (
            "top.toml",
            'version = 2\n[[schedule]]\nname = "x"\n',
            1,
            "unknown top-level key 'version'",
        ),
        ("syntax.yaml", "schedules:\n  - name: [\n  - name: b\n", 3, "YAML syntax error"),
        ("tabs.yaml", "schedules:\n\t- name: x\n", 2, "YAML syntax error"),
        ("cron.yaml", "schedules:\n  - cron: @daily\n", 2, "YAML syntax error"),
        ("top.yaml", "schedules: []\nversion: 2\n", 2, "unknown top-level key 'version'"),
        ("scalar.yaml", "just text\n", 1, "expected a 'schedules:' list"),
        ("notlist.yaml", "schedules:\n  name: x\n", 2, "'schedules' must be a list"),
        ("baddate.yaml", "name: x\nstart: 2025-02-30 10:00:00\n", None, "YAML error"),
    ],
)
def test_files_that_do_not_parse_give_one_error_with_a_line(
    tmp_path: Path, name: str, text: str, line: int | None, message: str
) -> None:
    path = write(tmp_path, name, text)

    error = only_error(load_path(path))

    assert (error.file, error.line, error.schedule, error.field) == (str(path), line, None, None)
    assert message in error.message


def test_yaml_duplicate_keys_are_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "dupe.yaml",
        """
        schedules:
          - name: a
            agent: one
            agent: two
            tenant: t
            cron: "@daily"
          - name: b
            agent: x
            tenant: t
            event: true
        """,
    )

    result = load_path(path)

    assert [s.name for s in result.schedules] == ["b"]
    error = only_error(result)
    assert (error.line, error.schedule, error.field) == (3, "a", "agent")
    assert error.message == "key 'agent' given twice (lines 3 and 4)"


def test_yaml_alias_bombs_are_refused(tmp_path: Path) -> None:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    path = write(tmp_path, "bomb.yaml", "\n".join(lines) + "\n")

    error = only_error(load_path(path))

    assert "aliases expand to too much data" in error.message


def test_yaml_entry_that_is_not_a_mapping(tmp_path: Path) -> None:
    path = write(tmp_path, "odd.yaml", "schedules:\n  - just a string\n")

    error = only_error(load_path(path))

    assert (error.line, error.message) == (2, "a schedule must be a table of fields, got str")


def test_yaml_control_characters_are_refused_with_their_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "nul.yaml",
        'name: x\nagent: a\ntenant: t\ncron: "@daily"\nuser: "ana\\0"\n',
    )

    error = only_error(load_path(path))

    assert (error.line, error.field) == (5, "user")
    assert "user holds a NUL character (U+0000) at character 4" in error.message


def test_yaml_naive_datetime_is_refused(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "naive.yaml",
        "name: x\nagent: a\ntenant: t\ncron: '@daily'\nend: 2025-06-01 10:00:00\n",
    )

    error = only_error(load_path(path))

    assert (error.line, error.field) == (5, "end")
    assert "has no UTC offset" in error.message


def test_duplicate_names_across_files_name_both_places(tmp_path: Path) -> None:
    first = write(
        tmp_path,
        "a.toml",
        '[[schedule]]\nname = "digest"\nagent = "a"\ntenant = "t"\nevent = true\n',
    )
    second = write(
        tmp_path,
        "b/c.yaml",
        "schedules:\n  - tenant: t\n    name: digest\n    agent: b\n    event: true\n",
    )

    result = load_path(tmp_path)

    assert result.schedules == ()  # neither wins: the stored one stays as it is
    error = only_error(result)
    assert (error.file, error.line, error.field) == (str(second), 3, "name")
    assert error.message.startswith(f"defined twice, here and at {first}:2; neither definition")
    assert str(error).startswith(f"{second}:3: schedule 'digest': field 'name': ")


def test_duplicate_names_within_a_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "twice.toml",
        '[[schedule]]\nname = "x"\nagent = "a"\ntenant = "t"\nevent = true\n' * 2,
    )

    result = load_path(path)

    error = only_error(result)
    assert result.schedules == ()
    assert error.line == 7 and f"here and at {path}:2;" in error.message


def test_a_name_given_three_times_or_first_invalid_is_never_applied(tmp_path: Path) -> None:
    entry = '[[schedule]]\nname = "x"\nagent = "a"\ntenant = "t"\n{}\n'
    path = write(
        tmp_path,
        "thrice.toml",
        entry.format('cron = "61 * * * *"')
        + entry.format("event = true") * 2
        + '[[schedule]]\nname = "y"\nagent = "a"\ntenant = "t"\nevent = true\n',
    )

    result = load_path(path)

    assert [s.name for s in result.schedules] == ["y"]
    assert [(e.line, e.field) for e in result.errors] == [(5, "cron"), (7, "name"), (12, "name")]
    assert all(f"{path}:2;" in e.message for e in result.errors[1:])


def test_inline_tables_without_lines_still_catch_a_repeated_name(tmp_path: Path) -> None:
    one = '{name = "x", agent = "a", tenant = "t", event = true}'
    path = write(tmp_path, "inline.toml", f"schedule = [{one}, {one}]\n")

    result = load_path(path)

    assert result.schedules == () and "defined twice" in only_error(result).message


def test_folder_is_read_recursively_in_sorted_order(tmp_path: Path) -> None:
    for name in ["z.toml", "a/b.yml", "a.yaml", "m/n/o.toml"]:
        stem = Path(name).stem
        write(tmp_path, name, f"name: {stem}\nagent: a\ntenant: t\nevent: true\n"
              if not name.endswith(".toml")
              else f'[[schedule]]\nname = "{stem}"\nagent = "a"\ntenant = "t"\nevent = true\n')  # fmt: skip
    write(tmp_path, "README.md", "not a schedule")
    write(tmp_path, ".hidden.toml", "this is not toml")
    write(tmp_path, ".git/x.yaml", ": : :")

    result = load_path(tmp_path)

    assert result.errors == ()
    assert [s.name for s in result.schedules] == ["b", "a", "o", "z"]  # a/b.yml < a.yaml


@pytest.mark.parametrize("text", ["", "# nothing yet\n"])
@pytest.mark.parametrize("name", ["empty.toml", "empty.yaml"])
def test_empty_files_hold_no_schedules(tmp_path: Path, name: str, text: str) -> None:
    result = load_path(write(tmp_path, name, text))

    assert result == LoadResult((), ())
    assert result.ok


def test_unreadable_and_unsupported_paths(tmp_path: Path) -> None:
    (tmp_path / "latin1.toml").write_bytes(b'[[schedule]]\nname = "caf\xe9"\n')
    write(tmp_path, "notes.txt", "hello")

    latin1 = only_error(load_path(tmp_path / "latin1.toml"))
    missing = only_error(load_path(tmp_path / "missing"))
    unsupported = only_error(load_path(tmp_path / "notes.txt"))

    assert "not UTF-8 text" in latin1.message
    assert missing.message == "no such file or folder"
    assert "unsupported file type" in unsupported.message


def test_schedule_error_string_without_optional_parts() -> None:
    assert str(ScheduleError("a.toml", None, None, None, "broken")) == "a.toml: broken"
    assert str(ScheduleError("a.toml", 3, None, "cron", "bad")) == "a.toml:3: field 'cron': bad"


@pytest.mark.parametrize(
    ("written", "message"),
    [
        ('"0s"', "heartbeat interval must be at least 1s, got 0s"),
        ("0", "heartbeat interval must be at least 1s, got 0s"),
        ('"500ms"', "heartbeat interval must be at least 1s, got 0.5s"),
        ('"-5s"', "invalid duration '-5s': must not be negative"),
        ("-5", "invalid duration -5: must not be negative"),
        ("-0.5", "invalid duration -0.5: must not be negative"),
    ],
)
@pytest.mark.parametrize("suffix", ["toml", "yaml"])
def test_a_zero_or_negative_heartbeat_names_file_line_and_field(
    tmp_path: Path, written: str, message: str, suffix: str
) -> None:
    if suffix == "toml":
        text = f'[[schedule]]\nname = "p"\nagent = "a"\ntenant = "t"\nheartbeat = {written}\n'
    else:
        text = f"schedules:\n  - name: p\n    agent: a\n    tenant: t\n    heartbeat: {written}\n"
    path = write(tmp_path, f"hb.{suffix}", text)

    error = only_error(load_path(path))

    assert str(error) == f"{path}:5: schedule 'p': field 'heartbeat': {message}"


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        ("*/5 * * * *", '; quote the cron expression, e.g. cron: "*/5 * * * *"'),
        ("* * * * *", '; quote the cron expression, e.g. cron: "*/5 * * * *"'),
        ("*every", '; quote the cron expression, e.g. cron: "*/5 * * * *"'),
        ("@daily", '; quote the cron expression, e.g. cron: "*/5 * * * *"'),
    ],
)
def test_an_unquoted_yaml_cron_says_to_quote_it(tmp_path: Path, value: str, hint: str) -> None:
    path = write(tmp_path, "c.yaml", f"schedules:\n  - name: p\n    agent: a\n    cron: {value}\n")

    error = only_error(load_path(path))

    assert error.line == 4 and error.message.startswith("YAML syntax error: ")
    assert error.message.endswith(hint)


def test_another_unquoted_star_value_names_its_key(tmp_path: Path) -> None:
    path = write(tmp_path, "g.yaml", "schedules:\n  - name: p\n    goal: *important*\n")

    assert only_error(load_path(path)).message.endswith(
        "; quote the value of 'goal': YAML reads an unquoted '*' specially"
    )


@pytest.mark.parametrize(
    ("zone", "suggested"),
    [
        ("CET", "Europe/Berlin"),
        ("EST", "America/New_York"),  # tzdata's EST is -05:00 all year: no DST
        ("EST5EDT", "America/New_York"),
        ("PST", "America/Los_Angeles"),  # not in tzdata; was "did you mean 'MST'?"
        ("CEST", "Europe/Berlin"),  # was "did you mean 'EST'?"
        ("IST", "Europe/Berlin"),  # ambiguous: only the general advice
    ],
)
def test_zone_abbreviations_are_refused_with_a_region_to_use(
    tmp_path: Path, zone: str, suggested: str
) -> None:
    path = write(
        tmp_path,
        "z.toml",
        f'[[schedule]]\nname = "x"\nagent = "a"\ntenant = "t"\ncron = "0 7 * * *"\n'
        f'timezone = "{zone}"\n',
    )

    error = only_error(load_path(path))

    assert (error.line, error.field) == (6, "timezone")
    assert f"time zone {zone!r} is an abbreviation, not a region" in error.message
    assert f"such as {suggested!r}" in error.message


def test_regions_utc_and_stored_legacy_zones_still_load() -> None:
    for zone in ("Europe/Berlin", "America/New_York", "UTC", "Etc/GMT+5"):
        assert Cron("0 7 * * *", zone).timezone == zone
    assert Cron("0 7 * * *", "CET").timezone == "CET"  # applied before: beat keeps firing it


@pytest.mark.parametrize("field", ["agent", "tenant", "user"])
def test_a_scope_longer_than_a_run_row_holds_is_refused_with_its_line(
    tmp_path: Path, field: str
) -> None:
    fields = {"agent": "a", "tenant": "t", "user": "u", field: "x" * (SCOPE_CHARS + 1)}
    body = "".join(f'{name} = "{value}"\n' for name, value in fields.items())
    path = write(tmp_path, "long.toml", f'[[schedule]]\nname = "n"\n{body}event = true\n')

    error = only_error(load_path(path))

    assert error.field == field and error.line == 3 + list(fields).index(field)
    assert error.message == f"{field} has {SCOPE_CHARS + 1} characters, more than {SCOPE_CHARS}"


def test_the_scope_limit_is_what_a_run_row_holds() -> None:
    assert {runs.c[c].type.length for c in ("agent", "tenant", "user_id")} == {SCOPE_CHARS}
