"""`nightshift schedules …` through click's CliRunner on real SQLite and PostgreSQL:
what an operator with many schedules and untidy folders meets."""

from __future__ import annotations

import json
from datetime import UTC, datetime, time, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import Engine, func, select

from schedules import catalog
from schedules.definition import Cron, Event, Heartbeat, Schedule
from tests.integration.sql_watch import Statements
from workers.cli import main_group
from workers.tables import runs

pytestmark = pytest.mark.integration

T0 = datetime(2026, 3, 2, 12, tzinfo=UTC)


def cli(engine: Engine, tmp_path: Path, *args: str) -> Result:
    url = engine.url.render_as_string(hide_password=False)
    return CliRunner().invoke(
        main_group, ["--data-dir", str(tmp_path / "data"), "--database-url", url, *args]
    )


def applied(engine: Engine, *wanted: Schedule) -> None:
    with engine.begin() as conn:
        catalog.apply(conn, wanted, T0, prune=False)


def many(count: int, prefix: str = "s") -> list[Schedule]:
    triggers = (Cron("0 7 * * *", "Europe/Berlin"), Heartbeat(timedelta(minutes=5)), Event())
    return [
        Schedule(name=f"{prefix}{i:03d}", agent="demo", tenant="acme", trigger=triggers[i % 3])
        for i in range(count)
    ]


def listed(result: Result) -> list[str]:
    assert result.exit_code == 0, result.output
    return [row["name"] for row in json.loads(result.stdout)]


def test_list_reads_the_schedules_once_however_many_there_are(
    engine: Engine, tmp_path: Path
) -> None:
    applied(engine, *many(3))
    with Statements() as few:
        assert len(listed(cli(engine, tmp_path, "schedules", "list", "--json"))) == 3
    applied(engine, *many(40, prefix="t"))
    with Statements() as lots:
        assert len(listed(cli(engine, tmp_path, "schedules", "list", "--json"))) == 43
    assert len(lots.seen) == len(few.seen)  # not one more query per schedule


def test_list_filters_by_glob_and_limits(engine: Engine, tmp_path: Path) -> None:
    applied(engine, *many(5, prefix="digest-"), *many(3, prefix="pulse_"))
    assert listed(cli(engine, tmp_path, "schedules", "list", "--json", "--name", "PULSE_*")) == [
        "pulse_000",
        "pulse_001",
        "pulse_002",
    ]
    assert listed(cli(engine, tmp_path, "schedules", "list", "--json", "--name", "*-00?")) == [
        f"digest-{i:03d}" for i in range(5)
    ]
    # '_' is a name character, not LIKE's "any one character"
    assert listed(cli(engine, tmp_path, "schedules", "list", "--json", "--name", "pulse_00")) == []
    assert listed(cli(engine, tmp_path, "schedules", "list", "--json", "--name", "pulse_001")) == [
        "pulse_001"
    ]

    limited = cli(engine, tmp_path, "schedules", "list", "--json", "--limit", "2")
    assert listed(limited) == ["digest-000", "digest-001"]
    assert "showing the first 2 schedules; more match" in limited.stderr
    exact = cli(engine, tmp_path, "schedules", "list", "--limit", "3", "--name", "pulse*")
    assert exact.exit_code == 0 and "more match" not in exact.stderr

    none = cli(engine, tmp_path, "schedules", "list", "--name", "ghost*")
    assert none.exit_code == 0 and "no applied schedule matches 'ghost*'" in none.stdout
    bad = cli(engine, tmp_path, "schedules", "list", "--limit", "0")
    assert bad.exit_code == 2 and "--limit" in bad.output


def stored(engine: Engine) -> dict[str, Schedule]:
    with engine.connect() as conn:
        return {a.name: a.schedule for a in catalog.all_schedules(conn)}


DIGEST = '[[schedule]]\nname = "digest"\nagent = "feed-watcher"\ntenant = "acme"\ncron = "{}"\n'


def test_a_name_defined_twice_leaves_the_stored_schedule_alone(
    engine: Engine, tmp_path: Path
) -> None:
    before = Schedule(name="digest", agent="demo", tenant="acme", trigger=Cron("0 6 * * *"))
    keep = Schedule(name="other", agent="demo", tenant="acme", trigger=Event())
    applied(engine, before, keep)
    folder = tmp_path / "schedules"
    (folder / "team").mkdir(parents=True)
    (folder / "a.toml").write_text(DIGEST.format("0 7 * * *"))
    (folder / "team" / "b.toml").write_text("\n" + DIGEST.format("0 8 * * *"))

    result = cli(engine, tmp_path, "schedules", "apply", str(folder))

    assert result.exit_code == 3
    assert "unknown agent" not in result.stderr
    assert f"{folder / 'team' / 'b.toml'}:3: schedule 'digest': field 'name'" in result.stderr
    assert f"here and at {folder / 'a.toml'}:2" in result.stderr
    now = stored(engine)
    assert now["digest"].fingerprint() == before.fingerprint()  # neither updated
    assert set(now) == {"digest", "other"}  # nor anything pruned


@pytest.mark.parametrize(
    "files",
    [
        {},
        {"a.json": "{}", "notes.txt": "todo"},
        {"README.md": "# x", "src/app.py": "", ".k.toml": ""},
    ],
    ids=["empty-folder", "only-json-and-txt", "some-other-folder"],
)
@pytest.mark.parametrize("dry_run", [False, True], ids=["apply", "dry-run"])
def test_a_path_without_schedules_deletes_nothing_unless_allowed(
    engine: Engine, tmp_path: Path, files: dict[str, str], dry_run: bool
) -> None:
    applied(engine, *many(3))
    folder = tmp_path / "schedules"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    flags = ["--dry-run"] if dry_run else []

    refused = cli(engine, tmp_path, "schedules", "apply", str(folder), *flags)

    assert refused.exit_code == 3
    assert f"no schedules found in {folder}" in refused.stderr
    assert "would delete all 3 applied schedules" in refused.stderr
    assert "--allow-empty" in refused.stderr
    visible = sorted(str(folder / n) for n in files if not n.startswith("."))
    if visible:
        assert f"warning: skipped {len(visible)} file(s)" in refused.stderr
        assert all(name in refused.stderr for name in visible)
    assert len(stored(engine)) == 3
    as_json = cli(engine, tmp_path, "schedules", "apply", str(folder), "--json", *flags)
    assert as_json.exit_code == 3
    document = json.loads(as_json.stdout)
    assert (document["changes"], document["pruned"], document["dry_run"]) == ([], False, dry_run)
    assert "would delete all 3 applied schedules" in document["errors"][-1]
    assert document["skipped_files"] == visible

    allowed = cli(engine, tmp_path, "schedules", "apply", str(folder), "--allow-empty", *flags)
    assert allowed.exit_code == 0, allowed.output
    assert len(stored(engine)) == (3 if dry_run else 0)


def test_skipped_files_are_named_beside_a_good_apply(engine: Engine, tmp_path: Path) -> None:
    folder = tmp_path / "schedules"
    folder.mkdir()
    (folder / "digest.toml").write_text(DIGEST.format("0 7 * * *"))
    (folder / "pulse.jsn").write_text("{}")

    result = cli(engine, tmp_path, "schedules", "apply", str(folder), "--json")

    assert result.exit_code == 0, result.output
    assert f"skipped 1 file(s) not ending in .toml, .yaml or .yml: {folder / 'pulse.jsn'}" in (
        result.stderr
    )
    assert json.loads(result.stdout)["skipped_files"] == [str(folder / "pulse.jsn")]
    assert set(stored(engine)) == {"digest"}


def test_dry_run_summary_says_would_change(engine: Engine, tmp_path: Path) -> None:
    folder = tmp_path / "schedules"
    folder.mkdir()
    (folder / "digest.toml").write_text(DIGEST.format("0 7 * * *"))

    result = cli(engine, tmp_path, "schedules", "apply", str(folder), "--dry-run")

    assert result.exit_code == 0, result.output
    assert "would create digest" in result.stdout
    assert f"schedules from {folder}: 1 would change, 0 unchanged" in result.stdout
    assert stored(engine) == {}


def test_list_shows_last_and_next_fire_in_the_schedules_zone(
    engine: Engine, tmp_path: Path
) -> None:
    berlin = Schedule(
        name="digest", agent="demo", tenant="acme", trigger=Cron("0 7 * * *", "Europe/Berlin")
    )
    applied(engine, berlin)
    with engine.begin() as conn:
        catalog.record_progress(conn, [catalog.Progress("digest", last_fire_at=T0)])

    rows = json.loads(cli(engine, tmp_path, "schedules", "list", "--json").stdout)
    assert rows[0]["last_fire"] == "2026-03-02T13:00:00+01:00"  # T0 is 12:00 UTC
    assert rows[0]["next_fire"].endswith(("+01:00", "+02:00"))
    table = cli(engine, tmp_path, "schedules", "list").stdout
    assert "NEXT FIRE (ITS ZONE)" in table and "LAST FIRE (ITS ZONE)" in table
    assert "2026-03-02T13:00:00+01:00" in table


def test_apply_writes_each_kind_of_change_in_one_statement(engine: Engine) -> None:
    """Created, updated, deleted and defined again after deletion: each kind one
    executemany, whatever the count, and every row as its definition says."""

    def apply(*wanted: Schedule) -> tuple[dict[str, int], list[str]]:
        with Statements() as sent, engine.begin() as conn:
            changes = catalog.apply(conn, wanted, T0)
        counts: dict[str, int] = {}
        for change in changes:
            counts[change.action.value] = counts.get(change.action.value, 0) + 1
        return counts, sent.seen

    first = many(40)
    assert apply(*first)[0] == {"create": 40}
    edited = [s.replace(goal="triage") if i % 2 else s for i, s in enumerate(first[:30])]
    counts, few_kinds = apply(*edited)  # 15 updated, 15 unchanged, 10 deleted
    assert counts == {"update": 15, "unchanged": 15, "delete": 10}
    again = [*edited, *first[30:35]]  # five defined again: their deleted rows come back
    counts, sent = apply(*again)
    assert counts == {"unchanged": 30, "create": 5}
    # the deletes are one more statement, not ten; reading what the edited rows' file
    # said about pausing one more (`catalog.apply` keeps a command-line pause)
    assert len(few_kinds) == len(sent) + 2

    with engine.connect() as conn:
        stored = {a.name: a for a in catalog.all_schedules(conn)}
        gone = {a.name for a in catalog.all_schedules(conn, include_deleted=True) if a.deleted}
    assert sorted(stored) == sorted(s.name for s in again)
    assert gone == {s.name for s in first[35:]}
    assert stored["s001"].schedule.goal == "triage" and stored["s000"].schedule.goal == ""
    assert all(stored[s.name].schedule.fingerprint() == s.fingerprint() for s in again)


def test_a_mistake_repeated_in_every_schedule_prints_the_first_errors_and_a_count(
    engine: Engine, tmp_path: Path
) -> None:
    """A generated file with the same wrong agent in 300 schedules: the first errors,
    then how many more, not 300 lines; --json still lists them all. Nothing is stored."""
    from workers.cli.schedule_cmds import ERRORS_SHOWN

    path = tmp_path / "generated.toml"
    path.write_text(
        "".join(
            f'[[schedule]]\nname = "s{i:03d}"\nagent = "ghost"\ntenant = "acme"\n'
            'cron = "0 7 * * *"\n\n'
            for i in range(300)
        )
    )
    result = cli(engine, tmp_path, "schedules", "apply", str(path))
    assert result.exit_code == 3
    lines = result.stderr.splitlines()
    assert sum(line.startswith("error: ") for line in lines) == ERRORS_SHOWN
    assert lines[0].startswith(f"error: {path}:1: schedule 's000': field 'agent'")
    assert f"… and {300 - ERRORS_SHOWN} more errors (300 in all; --json lists every one)" in lines
    assert lines[-1] == "nothing was deleted because of the errors above"
    as_json = cli(engine, tmp_path, "schedules", "apply", str(path), "--json")
    assert as_json.exit_code == 3 and len(json.loads(as_json.stdout)["errors"]) == 300
    assert stored(engine) == {}


@pytest.mark.parametrize(
    ("lines", "at", "field"),
    [
        ('user = "ana\\u0000"', 6, "user"),
        ('paused = true\npause_note = "db\\u0000move"', 7, "pause_note"),
        ('goal = "sum\\u001b[2Jup"', 6, "goal"),
        ('[schedule.payload]\nfolder = "IN\\u0000BOX"', 6, "payload"),
    ],
    ids=["user", "pause_note", "goal", "payload"],
)
def test_control_characters_are_refused_at_apply_and_nothing_is_stored(
    engine: Engine, tmp_path: Path, lines: str, at: int, field: str
) -> None:
    """PostgreSQL text cannot hold a NUL: stored, it failed every tick of the beat."""
    path = tmp_path / "nul.toml"
    path.write_text(DIGEST.format("0 7 * * *") + lines + "\n")

    result = cli(engine, tmp_path, "schedules", "apply", str(path))

    assert result.exit_code == 3, result.output
    assert "Traceback" not in result.output
    assert f"{path}:{at}: schedule 'digest': field '{field}':" in result.stderr
    assert stored(engine) == {}


def test_pause_refuses_a_note_with_a_control_character(engine: Engine, tmp_path: Path) -> None:
    applied(engine, Schedule(name="digest", agent="demo", tenant="acme", trigger=Event()))

    result = cli(engine, tmp_path, "schedules", "pause", "digest", "--note", "mail\x1b[2J")

    assert result.exit_code == 2 and "Invalid value for '--note'" in result.stderr
    assert "Traceback" not in result.output
    assert not stored_applied(engine, "digest").paused


def stored_applied(engine: Engine, name: str) -> catalog.AppliedSchedule:
    with engine.connect() as conn:
        return catalog.get(conn, name)


def test_backfill_refuses_a_to_in_the_future_and_a_malformed_from_is_a_usage_error(
    engine: Engine, tmp_path: Path
) -> None:
    applied(engine, Schedule(name="digest", agent="demo", tenant="acme", trigger=Cron("@daily")))
    backfill = ("schedules", "backfill", "digest", "--from", "2026-03-01T00:00:00Z", "--to")

    future = cli(engine, tmp_path, *backfill, "2100-01-01T00:00:00Z")
    assert future.exit_code == 3, future.output
    assert "the backfill ends in the future" in future.stderr
    backwards = cli(engine, tmp_path, *backfill, "2026-02-01T00:00:00Z")
    assert backwards.exit_code == 3 and "before it starts" in backwards.stderr
    malformed = cli(engine, tmp_path, *backfill[:4], "yesterday", "--to", "2026-03-02T00:00:00Z")
    assert malformed.exit_code == 2 and "Invalid value for '--from'" in malformed.stderr
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(runs)).scalar_one() == 0


def test_list_show_and_next_say_when_and_why_a_schedule_will_not_fire(
    engine: Engine, tmp_path: Path
) -> None:
    cron = Cron("0 7 * * *", "Europe/Berlin")
    applied(
        engine,
        Schedule(name="done", agent="demo", tenant="acme", trigger=cron, max_runs=2),
        Schedule(name="firing", agent="demo", tenant="acme", trigger=cron, max_runs=3),
        Schedule(name="resting", agent="demo", tenant="acme", trigger=cron),
    )
    with engine.begin() as conn:
        catalog.record_progress(
            conn,
            [catalog.Progress("done", runs_added=2), catalog.Progress("firing", runs_added=2)],
        )
        catalog.set_paused(conn, "resting", True, "mail server migration", T0)

    rows = {
        r["name"]: r
        for r in json.loads(cli(engine, tmp_path, "schedules", "list", "--json").stdout)
    }
    assert (rows["done"]["next_fire"], rows["done"]["not_firing"]) == (None, "max_runs 2 reached")
    assert rows["resting"]["not_firing"] == "paused (mail server migration)"
    assert rows["firing"]["next_fire"] and rows["firing"]["not_firing"] is None
    table = cli(engine, tmp_path, "schedules", "list").stdout
    assert "none: max_runs 2 reached" in table

    shown = json.loads(cli(engine, tmp_path, "schedules", "show", "done", "--json").stdout)
    assert (shown["next_fires"], shown["not_firing"]) == ([], "max_runs 2 reached")
    text = cli(engine, tmp_path, "schedules", "show", "done").stdout
    assert "  none: will not fire, max_runs 2 reached" in text

    for name, why in (("done", "max_runs 2 reached"), ("resting", "paused (mail server")):
        upcoming = cli(engine, tmp_path, "schedules", "next", name, "--json")
        assert upcoming.exit_code == 0 and json.loads(upcoming.stdout) == []
        assert f"{name} will not fire: {why}" in upcoming.stderr
        assert cli(engine, tmp_path, "schedules", "next", name).stdout == ""
    assert (
        len(json.loads(cli(engine, tmp_path, "schedules", "next", "firing", "--json").stdout)) == 10
    )


def test_apply_refuses_a_secret_in_a_schedule_and_never_echoes_it(
    engine: Engine, tmp_path: Path
) -> None:
    path = tmp_path / "secrets.toml"
    path.write_text(
        DIGEST.format("0 7 * * *")
        + '[schedule.payload]\nfolder = "INBOX"\npassword = "hunter2"\n\n'
        + '[[schedule]]\nname = "triage"\nagent = "feed-watcher"\ntenant = "acme"\nevent = true\n'
        + 'goal = "call the API with api_key=sk-abcdefghijklmnopqrstuvwxyz123456"\n\n'
        + '[[schedule]]\nname = "clean"\nagent = "feed-watcher"\ntenant = "acme"\nevent = true\n'
        + '[schedule.payload]\ntoken_count = 5\nnote = "password reset flow"\n'
    )

    result = cli(engine, tmp_path, "schedules", "apply", str(path))
    as_json = cli(engine, tmp_path, "schedules", "apply", str(path), "--json")

    assert result.exit_code == 3, result.output
    assert f"{path}:1: schedule 'digest': field 'payload': payload holds a secret" in result.stderr
    assert "(password_assignment)" in result.stderr
    assert f"{path}:10: schedule 'triage': field 'goal': goal holds a secret" in result.stderr
    for output in (result.output, as_json.output):
        assert "hunter2" not in output and "abcdefghijklmnop" not in output
    assert as_json.exit_code == 3 and len(json.loads(as_json.stdout)["errors"]) == 2
    assert set(stored(engine)) == {"clean"}


def test_show_prints_the_definition_as_its_file_spells_it(engine: Engine, tmp_path: Path) -> None:
    # It printed the stored trigger as a Python dict of seconds ("trigger: {'kind':
    # 'heartbeat', 'every': 300, 'active_hours': ['08:00:00', ...]}") and durations
    # as bare seconds ("time_limit: 900"); an operator reads fields of their file.
    pulse = Heartbeat(
        timedelta(minutes=5),
        jitter=timedelta(seconds=30),
        active_hours=(time(8), time(18)),
        timezone="America/New_York",
    )
    applied(
        engine,
        Schedule(
            name="pulse",
            agent="demo",
            tenant="acme",
            trigger=pulse,
            payload={"folder": "INBOX"},
            time_limit=timedelta(minutes=15),
        ),
        Schedule(
            name="digest", agent="demo", tenant="acme", trigger=Cron("0 7 * * *", "Asia/Tokyo")
        ),
        Schedule(name="hook", agent="demo", tenant="acme", trigger=Event()),
    )
    text = cli(engine, tmp_path, "schedules", "show", "pulse", "-n", "1").stdout
    for line in (
        "  heartbeat: 5m",
        "  jitter: 30s",
        "  active_hours: 08:00-18:00",
        "  timezone: America/New_York",
        '  payload: {"folder": "INBOX"}',
        "  catchup_window: 5m",
        "  time_limit: 15m",
    ):
        assert line in text.splitlines(), text
    assert "{'" not in text and "trigger:" not in text
    digest = cli(engine, tmp_path, "schedules", "show", "digest", "-n", "1").stdout.splitlines()
    assert "  cron: 0 7 * * *" in digest and "  timezone: Asia/Tokyo" in digest
    assert (
        "  event: true (runs only when triggered)"
        in cli(engine, tmp_path, "schedules", "show", "hook").stdout.splitlines()
    )
    # --json keeps the stored form
    shown = json.loads(cli(engine, tmp_path, "schedules", "show", "pulse", "--json").stdout)
    assert shown["definition"]["trigger"]["every"] == 300


def test_show_and_backfill_give_fires_in_the_schedules_zone(engine: Engine, tmp_path: Path) -> None:
    # Next fires were in the schedule's zone, but fires skipped by a backfill and
    # the fires that did not run were printed in UTC.
    applied(
        engine,
        Schedule(
            name="digest", agent="demo", tenant="acme", trigger=Cron("0 * * * *", "Asia/Tokyo")
        ),
    )
    backfill = cli(
        engine,
        tmp_path,
        "schedules",
        "backfill",
        "digest",
        "--from",
        "2026-03-01T00:00:00Z",
        "--to",
        "2026-03-01T01:00:00Z",
    )
    assert backfill.exit_code == 0, backfill.output
    assert "skipped 2026-03-01T10:00:00+09:00: overlap skip" in backfill.stdout
    text = cli(engine, tmp_path, "schedules", "show", "digest").stdout
    assert "  2026-03-01T10:00:00+09:00  overlap" in text, text


def test_apply_says_what_an_update_changes(engine: Engine, tmp_path: Path) -> None:
    # "update pulse" alone left the operator to diff the database by hand: with
    # 50,000 schedules in generated files, which edit landed where?
    path = tmp_path / "pulse.toml"
    pulse = '[[schedule]]\nname = "pulse"\nagent = "feed-watcher"\ntenant = "acme"\n'
    path.write_text(pulse + 'heartbeat = "5m"\n')
    assert cli(engine, tmp_path, "schedules", "apply", str(path)).exit_code == 0
    path.write_text(pulse + 'heartbeat = "10m"\njitter = "1m"\ngoal = "check the feed"\n')

    planned = cli(engine, tmp_path, "schedules", "apply", str(path), "--dry-run")
    assert planned.exit_code == 0, planned.output
    assert (
        f"would update pulse  ({path}:1): goal - -> check the feed; heartbeat 5m -> 10m;"
        " jitter - -> 1m"
    ) in planned.stdout.splitlines()
    applied_json = json.loads(
        cli(engine, tmp_path, "schedules", "apply", str(path), "--json").stdout
    )
    [change] = applied_json["changes"]
    assert change["action"] == "update"
    assert change["changed"] == {
        "heartbeat": ["5m", "10m"],
        "jitter": ["-", "1m"],
        "goal": ["-", "check the feed"],
    }
    again = json.loads(cli(engine, tmp_path, "schedules", "apply", str(path), "--json").stdout)
    assert again["changes"] == [{"name": "pulse", "action": "unchanged", "source": f"{path}:1"}]
