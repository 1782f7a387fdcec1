"""The CLI as a user meets it: bad input gets a clear error, a non-zero exit, and
loses nothing already stored."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.acceptance

GOOD = """
[[schedule]]
name = "nightly"
agent = "feed-watcher"
tenant = "acme"
cron = "0 3 * * *"
timezone = "Europe/Berlin"
"""

BAD_CRON = """
[[schedule]]
name = "digest"
agent = "feed-watcher"
tenant = "acme"
cron = "61 * * * *"

[[schedule]]
name = "pulse"
agent = "feed-watcher"
tenant = "acme"
heartbeat = "30s"
"""

UNKNOWN_AGENT = """
[[schedule]]
name = "ghostly"
agent = "ghost"
tenant = "acme"
heartbeat = "1m"
"""


def nightshift(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("NIGHTSHIFT_")}
    base["NIGHTSHIFT_DATA_DIR"] = str(tmp_path / "data")
    return subprocess.run(
        [sys.executable, "-m", "workers.cli", *args],
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
        cwd=tmp_path,
    )


def applied_names(tmp_path: Path) -> list[str]:
    listed = nightshift(tmp_path, "schedules", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return sorted(s["name"] for s in json.loads(listed.stdout))


def assert_nothing_stored(tmp_path: Path) -> None:
    """Not even a database was made, and a read says so rather than "no runs"."""
    listed = nightshift(tmp_path, "runs", "--json")
    assert listed.returncode == 4 and "no nightshift database at" in listed.stderr
    assert not (tmp_path / "data" / "nightshift.db").exists()


def test_bad_cron_names_file_schedule_and_field_and_deletes_nothing(tmp_path: Path) -> None:
    (tmp_path / "good.toml").write_text(GOOD)
    assert nightshift(tmp_path, "schedules", "apply", "good.toml").returncode == 0
    (tmp_path / "good.toml").unlink()
    (tmp_path / "bad.toml").write_text(BAD_CRON)

    result = nightshift(tmp_path, "schedules", "apply", "bad.toml")

    assert result.returncode == 3
    assert "bad.toml:" in result.stderr and "'digest'" in result.stderr
    assert "cron" in result.stderr and "nothing was deleted" in result.stderr
    assert applied_names(tmp_path) == ["nightly", "pulse"]  # the good one applied, none lost


def test_unknown_agent_in_a_schedule_is_refused_with_its_place(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text(UNKNOWN_AGENT)
    result = nightshift(tmp_path, "schedules", "apply", "s.toml")
    assert result.returncode == 3
    assert "s.toml:2" in result.stderr and "'ghostly'" in result.stderr
    assert "field 'agent'" in result.stderr and "unknown agent 'ghost'" in result.stderr
    assert applied_names(tmp_path) == []


@pytest.mark.parametrize("command", [["runs"], ["db", "upgrade"]])
def test_unreachable_database_is_named_without_its_password(
    tmp_path: Path, command: list[str]
) -> None:
    url = "postgresql://nightshift:hunter2-secret@127.0.0.1:1/nightshift"
    result = nightshift(tmp_path, *command, env={"NIGHTSHIFT_DATABASE_URL": url})
    assert result.returncode == 4 and "Traceback" not in result.stderr, result.stderr
    assert "cannot reach the database at postgresql://nightshift:***@127.0.0.1:1/nightshift" in (
        result.stderr
    )
    assert "hunter2" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    ("url", "code", "message"),
    [
        ("mysql://127.0.0.1/nightshift", 3, "unsupported database URL mysql://"),
        ("postgresql+nodriver://127.0.0.1/x", 3, "names the driver 'nodriver'"),
        ("sqlite:////proc/nightshift/store.db", 4, "cannot open the database at sqlite:////proc/"),
    ],
)
def test_db_upgrade_answers_a_database_it_cannot_use_as_every_command_does(
    tmp_path: Path, url: str, code: int, message: str
) -> None:
    result = nightshift(tmp_path, "db", "upgrade", env={"NIGHTSHIFT_DATABASE_URL": url})
    assert result.returncode == code and "Traceback" not in result.stderr, result.stderr
    assert message in result.stderr


def test_trigger_for_an_unknown_agent_fails_and_enqueues_nothing(tmp_path: Path) -> None:
    result = nightshift(tmp_path, "trigger", "ghost", "--tenant", "acme")
    assert result.returncode == 3
    assert "unknown agent 'ghost'" in result.stderr and "feed-watcher" in result.stderr
    assert_nothing_stored(tmp_path)


def test_trigger_refuses_a_user_the_store_cannot_keep(tmp_path: Path) -> None:
    result = nightshift(
        tmp_path, "trigger", "feed-watcher", "--tenant", "acme", "--user", "u" * 300
    )
    assert result.returncode == 3
    assert "scope user has 300 characters, more than 128; nothing was enqueued" in result.stderr
    assert_nothing_stored(tmp_path)


@pytest.mark.parametrize(
    ("option", "value", "kind"),
    [
        ("--event-id", "sk-abcdefghijklmnopqrstuvwxyz0123456789", "openai_key"),
        ("--event-id", "INC-4111 1111 1111 1111", "card_number"),
        ("--user", "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB", "github_token"),
    ],
)
def test_trigger_refuses_a_secret_that_would_become_the_run_key(
    tmp_path: Path, option: str, value: str, kind: str
) -> None:
    # The payload and the goal are redacted; the event id, tenant and user make the
    # run key, which the run record, the broker, Flower and the logs keep whole.
    result = nightshift(tmp_path, "trigger", "feed-watcher", "--tenant", "acme", option, value)
    assert result.returncode == 3, result.stderr
    named = "scope user" if option == "--user" else option  # a scope part, as memory says
    assert f"{named} holds a secret ({kind})" in result.stderr
    assert value not in result.stderr
    assert "nothing was enqueued" in result.stderr and value not in result.stderr
    assert_nothing_stored(tmp_path)


def test_a_long_event_id_still_makes_one_run(tmp_path: Path) -> None:
    event = ["trigger", "feed-watcher", "--tenant", "acme", "--event-id", "e" * 300, "--json"]
    first = json.loads(nightshift(tmp_path, *event).stdout)
    again = json.loads(nightshift(tmp_path, *event).stdout)
    assert (first["enqueued"], again["enqueued"]) == (True, False)
    assert first["run_key"] == again["run_key"] and len(first["run_key"]) == 255
    [run] = json.loads(nightshift(tmp_path, "runs", "--json").stdout)
    assert run["key"] == first["run_key"]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ("x" * 70_000, "larger than 65536 bytes"),
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ("null", "must be a JSON object"),
        ('{"a":' * 65 + "1" + "}" * 65, "nests deeper than 64 levels"),
        ("[" * 20_000 + "]" * 20_000, "nests deeper than 64 levels"),  # past the decoder's depth
        ('{"reading": NaN}', "holds NaN, which JSON has no form for"),
        ('{"to": "ana", "to": "root"}', "has the key 'to' twice in one object"),
        ('{"a": 1e999}', "holds the number 1e999, past a float's range (Infinity)"),
        ('{"a": ' + "9" * 5000 + "}", "holds an integer of 5000 digits, too long to read"),
        ('{"a": "x\\u0000"}', "holds a NUL character in the value at a, which no store keeps"),
    ],
)
def test_bad_payloads_are_refused(tmp_path: Path, payload: str, message: str) -> None:
    result = nightshift(
        tmp_path, "trigger", "feed-watcher", "--tenant", "acme", "--payload", "-", stdin=payload
    )
    assert result.returncode == 3 and message in result.stderr
    assert "Traceback" not in result.stderr


def test_bad_setting_names_the_variable(tmp_path: Path) -> None:
    result = nightshift(tmp_path, "runs", env={"NIGHTSHIFT_LEASE_SECONDS": "soon"})
    assert result.returncode == 3 and "NIGHTSHIFT_LEASE_SECONDS='soon'" in result.stderr


def test_tenant_moves_from_sqlite_to_postgresql_and_reads_the_same(tmp_path: Path) -> None:
    from memory.engine import open_engine
    from memory.records import Candidate, Kind, Provenance, Scope, Source
    from memory.store import Store
    from tests.services import postgres_database
    from workers import schema

    sqlite_url = f"sqlite:///{tmp_path / 'data' / 'nightshift.db'}"
    store = Store(open_engine(sqlite_url))
    schema.upgrade(store.engine)
    for n, value in enumerate(["2027-01-01", "2027-02-01", "2027-03-01"]):
        store.apply(
            [
                Candidate(
                    scope=Scope("acme", "ana", "triage"),
                    kind=Kind.FACT,
                    content=f"renewal on {value}",
                    key="renewal",
                    provenance=Provenance(source=Source.STATED, task_id=f"t{n}"),
                )
            ],
            handle=f"h{n}",
            actor="writer",
        )
    store.engine.dispose()
    scope = ["--tenant", "acme", "--user", "ana", "--agent", "triage"]
    exported = nightshift(tmp_path, "memory", "export", "--whole-tenant", *scope)
    assert exported.returncode == 0, exported.stderr
    (tmp_path / "acme.jsonl").write_text(exported.stdout)

    with postgres_database(empty=True) as pg_url:
        env = {"NIGHTSHIFT_DATABASE_URL": pg_url}
        assert nightshift(tmp_path, "db", "upgrade", env=env).returncode == 0
        imported = nightshift(tmp_path, "memory", "import", "acme.jsonl", env=env)
        assert imported.returncode == 0, imported.stderr
        for view in (["show", "--all"], ["history", "renewal"]):
            before = nightshift(tmp_path, "memory", *view, *scope)
            after = nightshift(tmp_path, "memory", *view, *scope, env=env)
            assert before.returncode == after.returncode == 0
            assert after.stdout.splitlines() == before.stdout.splitlines()
            assert before.stdout.count("renewal on") == 3


def test_a_broker_that_does_not_answer_is_named_and_the_run_stays_queued(tmp_path: Path) -> None:
    dead = {"NIGHTSHIFT_BROKER_URL": "redis://127.0.0.1:1/9"}
    result = nightshift(tmp_path, "trigger", "feed-watcher", "--tenant", "acme", env=dead)
    assert result.returncode == 4 and "Traceback" not in result.stderr, result.stderr
    assert "cannot reach the broker" in result.stderr
    [run] = json.loads(nightshift(tmp_path, "runs", "--json").stdout)
    assert run["status"] == "queued"
    # A manual run's key holds a fresh id: the error names it, or nobody could tell
    # which run will still happen (it said "runs already recorded stay queued").
    assert f"Recorded, not sent: {run['key']}." in result.stderr
    assert "once the broker answers" in result.stderr

    (tmp_path / "pulse.toml").write_text(
        '[[schedule]]\nname = "pulse"\nagent = "feed-watcher"\ntenant = "acme"\nheartbeat = "1h"\n'
    )
    assert nightshift(tmp_path, "schedules", "apply", "pulse.toml").returncode == 0
    fired = nightshift(tmp_path, "schedules", "trigger", "pulse", env=dead)
    assert fired.returncode == 4 and "Traceback" not in fired.stderr, fired.stderr
    [fire] = json.loads(nightshift(tmp_path, "runs", "--schedule", "pulse", "--json").stdout)
    assert fire["status"] == "queued"
    assert f"Recorded, not sent: {fire['key']}." in fired.stderr


def refusing_redis(how: str) -> str:
    """The test Redis, with a user it has no such password for, or a database index
    past its `databases`: a broker that answers and says no."""
    from urllib.parse import urlsplit

    from tests.services import REDIS_URL, redis_available

    redis_available()
    where = urlsplit(REDIS_URL)
    if how == "password":
        return f"redis://no-such-user:wrong@{where.hostname}:{where.port or 6379}/0"
    return f"redis://{where.hostname}:{where.port or 6379}/9999"


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("password", "the broker refused: invalid username-password pair"),
        ("database", "the broker refused: DB index is out of range"),
    ],
)
def test_a_broker_that_refuses_is_named_at_once_by_trigger_up_and_worker(
    tmp_path: Path, how: str, said: str
) -> None:
    # Not "cannot reach the broker … once the broker answers": it answered. And `up`
    # and the worker stop with the reason instead of retrying it for ever (`up` ended
    # with "beat exited with code 1", its worker and writer still retrying).
    refusing = {"NIGHTSHIFT_BROKER_URL": refusing_redis(how)}
    result = nightshift(tmp_path, "trigger", "feed-watcher", "--tenant", "acme", env=refusing)
    assert result.returncode == 4 and "Traceback" not in result.stderr, result.stderr
    assert said in result.stderr and "check NIGHTSHIFT_BROKER_URL" in result.stderr
    assert "once the broker accepts them" in result.stderr
    [run] = json.loads(nightshift(tmp_path, "runs", "--json").stdout)
    assert run["status"] == "queued"
    assert f"Recorded, not sent: {run['key']}." in result.stderr
    for command in (["up"], ["worker"]):
        started = nightshift(tmp_path, *command, env=refusing)
        assert started.returncode == 4, started.stdout + started.stderr
        assert said in started.stderr and "Traceback" not in started.stderr
