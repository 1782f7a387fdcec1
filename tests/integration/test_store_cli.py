"""`nightshift memory …` read, edit and review commands against real databases."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from memory.engine import open_engine
from memory.records import Candidate, Kind, Provenance, Scope, Source
from memory.store import Store
from tests.services import postgres_database
from workers import runs, schema
from workers.cli import first_not_utf8, main_group
from workers.cli.base import EXIT_INVALID_INPUT, EXIT_UNAVAILABLE
from workers.hooks.write_back import receipt_handle

pytestmark = pytest.mark.integration

ANA = Scope("acme", "ana", "triage")
ANA_FLAGS = ["--tenant", "acme", "--user", "ana", "--agent", "triage"]


@pytest.fixture
def store(database_url: str) -> Iterator[Store]:
    engine = open_engine(database_url)
    schema.upgrade(engine)
    yield Store(engine)
    engine.dispose()


def cli(store: Store, *args: str) -> Result:
    assert store.engine is not None
    url = store.engine.url.render_as_string(hide_password=False)
    return CliRunner().invoke(main_group, ["--database-url", url, "memory", *args])


def said(
    content: str,
    *,
    scope: Scope = ANA,
    key: str = "",
    source: Source = Source.STATED,
    task: str = "t1",
) -> Candidate:
    return Candidate(
        scope, Kind.FACT, content, Provenance(source, task_id=task, run_id=task), key=key
    )


def test_show_search_history_export_stay_in_scope(store: Store) -> None:
    store.apply(
        [
            said("renewal in May", key="renewal", task="a"),
            said(
                "bob renewal in March",
                scope=Scope("acme", "bob", "triage"),
                key="renewal",
                task="b",
            ),
        ],
        handle="h1",
        actor="writer",
    )
    store.apply([said("renewal in June", key="renewal", task="c")], handle="h2", actor="w")
    shown = json.loads(cli(store, "show", *ANA_FLAGS, "--json").output)
    assert [m["content"] for m in shown] == ["renewal in June"]
    hits = json.loads(cli(store, "search", *ANA_FLAGS, "renewal", "--json").output)
    assert [h["content"] for h in hits] == ["renewal in June"]
    chain = json.loads(cli(store, "history", *ANA_FLAGS, "renewal", "--json").output)
    assert [(m["content"], m["status"]) for m in chain] == [
        ("renewal in May", "superseded"),
        ("renewal in June", "active"),
    ]
    assert chain[0]["superseded_by_id"] == chain[1]["id"]
    lines = cli(store, "export", *ANA_FLAGS).output.splitlines()
    assert sorted(json.loads(line)["content"] for line in lines) == [
        "renewal in June",
        "renewal in May",
    ]
    table = cli(store, "history", *ANA_FLAGS, "renewal")
    assert table.exit_code == 0 and "superseded" in table.output


def test_load_with_an_origin_applies_the_agents_rules(store: Store) -> None:
    store.apply(
        [
            said("ana salary band B4", task="a"),
            said(
                "restart billing queue first",
                scope=Scope("acme", "", "triage"),
                source=Source.OPERATOR,
                task="b",
            ),
        ],
        handle="h",
        actor="w",
    )
    as_operator = json.loads(cli(store, "load", *ANA_FLAGS, "--goal", "billing", "--json").output)
    assert len(as_operator["ids"]) == 2
    shared = cli(store, "load", *ANA_FLAGS, "--goal", "billing", "--origin", "shared", "--json")
    assert [m["content"] for m in json.loads(shared.output)["ranked"]] == [
        "restart billing queue first"
    ]


def test_edit_conflict_shows_both_versions_and_force_is_audited(store: Store) -> None:
    store.apply([said("renewal in May")], handle="h", actor="w")
    [memory] = store.show(ANA)
    ok = cli(
        store,
        "edit",
        *ANA_FLAGS,
        memory.id,
        "--version",
        "1",
        "--content",
        "June",
        "--actor",
        "op1",
        "--json",
    )
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["current"]["version"] == 2
    stale = cli(
        store,
        "edit",
        *ANA_FLAGS,
        memory.id,
        "--version",
        "1",
        "--content",
        "July",
        "--actor",
        "op2",
        "--json",
    )
    assert stale.exit_code == 5
    conflict = json.loads(stale.output[: stale.output.rindex("}") + 1])
    assert conflict["current"]["content"] == "June" and conflict["proposed"]["content"] == "July"
    forced = cli(
        store,
        "edit",
        *ANA_FLAGS,
        memory.id,
        "--version",
        "1",
        "--content",
        "July",
        "--actor",
        "op2",
        "--force",
        "--reason",
        "customer called",
    )
    assert forced.exit_code == 0 and "(forced)" in forced.output
    assert [e.action for e in store.audit("acme", memory.id)] == [
        "write.stored",
        "edit",
        "edit.forced",
    ]
    secret = cli(
        store,
        "edit",
        *ANA_FLAGS,
        memory.id,
        "--version",
        "3",
        "--content",
        "password=hunter2hunter2",
    )
    assert secret.exit_code == 3 and "hunter2" not in secret.output


def test_audit_prints_who_changed_a_memory_and_stays_in_its_tenant(store: Store) -> None:
    store.apply(
        [said("renewal in May", key="renewal"), said("password=hunter2hunter2")],
        handle="h1",
        actor="writer-1",
    )
    store.apply([said("renewal in June", key="renewal", task="t2")], handle="h2", actor="writer-1")
    first, second = store.history(ANA, "renewal")

    table = cli(store, "audit", "--tenant", "acme", "--memory", first.id)
    assert table.exit_code == 0, table.output
    lines = table.output.splitlines()
    assert lines[0].split() == ["AT", "ACTOR", "ACTION", "MEMORY", "DETAIL"]
    assert [line.split()[3] for line in lines[1:]] == ["write.stored"]
    assert "handle=h1" in lines[1] and "source=stated" in lines[1]

    whole = cli(store, "audit", "--tenant", "acme", "--json")
    assert whole.exit_code == 0, whole.output
    entries = json.loads(whole.output)
    assert entries == json.loads(json.dumps([e.to_json() for e in store.audit("acme")]))
    assert [(e["action"], e["memory_id"]) for e in entries] == [
        ("write.stored", first.id),
        ("write.refused", None),
        ("write.superseded", second.id),
    ]
    assert entries[2]["detail"]["superseded"] == first.id
    assert "hunter2" not in whole.output

    other = cli(store, "audit", "--tenant", "globex", "--memory", first.id)
    assert other.exit_code == 0 and other.output.strip() == f"no audit entries for {first.id}"


def test_review_list_approve_reject(store: Store) -> None:
    store.apply(
        [
            said("likes mornings", source=Source.INFERRED, task="a"),
            said("likes tea", source=Source.INFERRED, task="b"),
        ],
        handle="h",
        actor="w",
    )
    pending = json.loads(cli(store, "review", "list", *ANA_FLAGS, "--json").output)
    by_content = {m["content"]: m["id"] for m in pending}
    assert set(by_content) == {"likes mornings", "likes tea"}
    tenant_layer = cli(store, "review", "list", "--tenant", "acme")
    assert "nothing waits for review in what acme/*/* reads (--all: the tenant)" in (
        tenant_layer.output
    )
    whole = json.loads(cli(store, "review", "list", "--tenant", "acme", "--all", "--json").output)
    assert {m["id"] for m in whole} == set(by_content.values())
    approved = cli(store, "review", "approve", *ANA_FLAGS, by_content["likes tea"], "--json")
    assert json.loads(approved.output)["status"] == "active"
    rejected = cli(store, "review", "reject", *ANA_FLAGS, by_content["likes mornings"])
    assert rejected.exit_code == 0 and "rejected" in rejected.output
    again = cli(store, "review", "reject", *ANA_FLAGS, by_content["likes mornings"])
    assert again.exit_code == 3 and "not waiting for review" in again.output
    assert [m.content for m in store.show(ANA)] == ["likes tea"]


def test_why_prints_what_a_run_was_given_and_what_it_wrote(store: Store) -> None:
    store.apply([said("db-primary is the leader")], handle="earlier", actor="w")
    given = store.load(ANA, goal="db-primary")
    now = datetime.now(UTC)
    key = "watch@2026-12-01T09:00:00Z"
    assert store.engine is not None
    with store.engine.begin() as conn:
        runs.create(
            conn, [runs.RunRequest(key=key, agent="triage", tenant="acme", user="ana")], now
        )
        runs.claim(conn, key, "me", now, timedelta(minutes=1))
        runs.record_given(conn, key, "me", given.ids)
        runs.finish(
            conn,
            key,
            "me",
            now,
            status=runs.RunStatus.SUCCEEDED,
            candidates=1,
            write_handle=f"write:{key}",
            tried="compared replica lag with the primary",
            evidence="grafana panel 7",
        )
    store.apply([said("db-replica lag 3s", task=key)], handle=f"write:{key}", actor="writer")
    out = json.loads(cli(store, "why", key, "--json").output)
    assert [m["content"] for m in out["loaded"]] == ["db-primary is the leader"]
    assert out["receipt"]["counts"] == {"stored": 1}
    assert out["attempt"] == {
        "outcome": "succeeded",
        "tried": "compared replica lag with the primary",
        "evidence": "grafana panel 7",
    }
    table = cli(store, "why", key)
    assert "db-primary is the leader" in table.output and "stored" in table.output
    assert "attempt: tried compared replica lag with the primary; evidence grafana panel 7" in (
        table.output
    )
    assert cli(store, "why", "nope").exit_code == 3


def test_a_receipt_is_found_by_its_run_key_written_out_in_full(store: Store) -> None:
    # A triggered run's key ("triage/acme/ana@manual:<uuid>", 61 characters) is longer
    # than a handle's column holds, so its handle is shortened with a hash: the
    # documented `memory receipt write:<run key>` answered "no receipt yet".
    key = "triage/acme/ana@manual:0b9e2a57-3c4d-4e8f-9a1b-2c3d4e5f6a7b"
    store.apply(
        [said("db-replica lag 3s", task=key)], handle=receipt_handle("write", key), actor="w"
    )
    found = cli(store, "receipt", f"write:{key}", "--json")
    assert found.exit_code == 0, found.output
    assert json.loads(found.output)["counts"] == {"stored": 1}
    missing = cli(store, "receipt", f"write:{key[:-1]}0")
    assert missing.exit_code == 3 and "no receipt" in missing.output


def test_write_refuses_a_scope_the_store_cannot_keep_before_sending_it(store: Store) -> None:
    result = cli(
        store, "write", "--tenant", "t" * 129, "--user", "ana", "--content", "renewal in March"
    )
    assert result.exit_code == 2 and "Invalid value for '--tenant'" in result.output
    assert "scope tenant has 129 characters, more than 128" in result.output


def test_an_argument_that_is_not_utf8_is_refused_before_anything_runs(tmp_path: Path) -> None:
    assert first_not_utf8(["memory", "show", "--tenant", "acme"]) is None
    assert first_not_utf8(["memory", "show", "--tenant", "ac\udcffme"]) == 4
    url = f"sqlite:///{tmp_path / 'never.db'}"
    args = ["--database-url", url, "memory", "show", "--tenant", "ac\udcffme"]  # byte 0xff
    done = subprocess.run(
        [sys.executable, "-c", "from workers.cli import main; main()", *args],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=60,
    )
    assert done.returncode == EXIT_INVALID_INPUT
    assert "argument 6 ('ac\\udcffme') is not valid UTF-8" in done.stderr
    assert not (tmp_path / "never.db").exists()


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("mysql://x@db/nightshift", "unsupported database URL mysql://x@db/nightshift"),
        ("nonsense", "database URL 'nonsense' is not a URL"),
    ],
)
def test_a_database_url_it_cannot_use_is_named_not_a_traceback(url: str, said: str) -> None:
    result = CliRunner().invoke(
        main_group, ["--database-url", url, "memory", "show", "--tenant", "acme"]
    )
    assert result.exit_code == EXIT_INVALID_INPUT, result.output
    assert said in result.output and "Traceback" not in result.output


def test_postgres_is_read_as_postgresql() -> None:
    with postgres_database() as url:
        engine = open_engine(url.replace("postgresql://", "postgres://", 1))
        try:
            with engine.connect() as conn:
                assert conn.exec_driver_sql("SELECT 1").scalar() == 1
            assert engine.driver == "psycopg2"
        finally:
            engine.dispose()


def test_an_empty_tenant_is_a_usage_error(store: Store) -> None:
    result = cli(store, "write", "--tenant", "", "--content", "x")
    assert result.exit_code == 2
    assert "Invalid value for '--tenant'" in result.output and "must not be empty" in result.output


def test_a_read_from_a_sqlite_file_that_is_not_there_says_so_and_makes_nothing(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path}/typo/nightshift.db"
    result = CliRunner().invoke(
        main_group, ["--database-url", url, "memory", "search", "--tenant", "acme", "renewal"]
    )
    assert result.exit_code == EXIT_UNAVAILABLE, result.output
    assert f"no nightshift database at {tmp_path}/typo/nightshift.db" in result.output
    assert "nothing matches" not in result.output
    status = CliRunner().invoke(
        main_group,
        ["--data-dir", str(tmp_path / "data"), "--database-url", url, "status", "--json"],
    )
    database = json.loads(status.output)["checks"][0]
    assert status.exit_code == 1 and not database["ok"]
    assert database["detail"] == f"no nightshift database at {tmp_path}/typo/nightshift.db"
    assert not (tmp_path / "typo").exists()
    # `db upgrade` makes one; then the same read answers from it.
    assert CliRunner().invoke(main_group, ["--database-url", url, "db", "upgrade"]).exit_code == 0
    result = CliRunner().invoke(
        main_group, ["--database-url", url, "memory", "search", "--tenant", "acme", "renewal"]
    )
    assert result.exit_code == 0 and "nothing matches" in result.output


def test_a_scope_part_the_store_cannot_hold_is_a_usage_error(store: Store) -> None:
    result = cli(store, "show", "--tenant", "acme", "--user", "a" * 200)
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "Invalid value for '--user'" in result.output
    assert "scope user has 200 characters, more than 128" in result.output


@pytest.mark.parametrize(
    ("flag", "value", "secret"),
    [
        ("--agent", "xoxb-123456789012-abcdefghijkl", "123456789012"),
        ("--user", "password=ScopeHunter1", "ScopeHunter1"),
        ("--user", "sk_live_abcdefghij0123456789", "abcdefghij0123456789"),
        ("--user", "4111111111111111", "4111111111111111"),
        ("--tenant", "sk_live_abcdefghij0123456789", "abcdefghij0123456789"),
    ],
)
def test_write_refuses_a_scope_holding_a_secret_before_sending_it(
    store: Store, flag: str, value: str, secret: str
) -> None:
    scope = {"--tenant": "acme", "--user": "ana", "--agent": "triage", flag: value}
    args = [a for pair in scope.items() for a in pair]
    result = cli(store, "write", *args, "--content", "renewal in March")
    assert result.exit_code == 2 and f"Invalid value for '{flag}'" in result.output
    assert "holds a secret" in result.output and secret not in result.output


def test_import_refuses_a_row_holding_a_secret_naming_its_line(
    store: Store, tmp_path: Path
) -> None:
    lines = [
        json.dumps({"format": "nightshift.tenant-export/1", "tenant": "acme"}),
        json.dumps({"table": "ns_audit", "row": {"tenant": "acme", "detail": {"k": "v"}}}),
        json.dumps(
            {"table": "ns_audit", "row": {"tenant": "acme", "actor": "sk_live_" + "a" * 24}}
        ),
    ]
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = cli(store, "import", str(path))
    assert result.exit_code == EXIT_INVALID_INPUT, result.output
    assert "line 3: a ns_audit row holds a secret (stripe_key)" in result.output
    assert "nothing was imported" in result.output and "a" * 24 not in result.output
    assert store.audit("acme") == []


@pytest.mark.parametrize(
    ("user", "said"),
    [
        ("an\u200ba", "scope user holds an invisible character"),
        ("ana\u202e", "scope user holds an invisible character"),
        ("ana\x1b[2J", "scope user holds a control character"),
        ("ana\nroot", "scope user holds a control character"),
    ],
)
def test_writing_to_a_scope_with_control_or_invisible_characters_is_a_usage_error(
    store: Store, user: str, said: str
) -> None:
    result = cli(store, "write", "--tenant", "acme", "--user", user, "--content", "x")
    assert result.exit_code == 2 and "Invalid value for '--user'" in result.output
    assert said in result.output
    # What an event made is still read (and printed escaped: test_cli_terminal).
    assert cli(store, "show", "--tenant", "acme", "--user", user).exit_code == 0


def test_small_usage_errors_are_named_before_anything_is_sent(store: Store) -> None:
    origin = cli(store, "load", *ANA_FLAGS, "--origin", "bogus")
    assert origin.exit_code == 2 and "'private', 'shared', 'api'" in origin.output
    stated = cli(store, "write", "--tenant", "acme", "--source", "stated", "--content", "x")
    assert stated.exit_code == 2 and "--source stated needs --user" in stated.output
    keyless = cli(store, "history", *ANA_FLAGS, "")
    assert keyless.exit_code == 2 and "must not be empty" in keyless.output


def test_write_reads_its_content_from_stdin_for_a_dash(store: Store, tmp_path: Path) -> None:
    assert store.engine is not None
    url = store.engine.url.render_as_string(hide_password=False)
    args = ["--data-dir", str(tmp_path), "--database-url", url, "--broker-url", "filesystem://"]
    result = CliRunner().invoke(
        main_group,
        [*args, "memory", "write", *ANA_FLAGS, "--content", "-", "--json"],
        input="renewal in March\n",
    )
    assert result.exit_code == 0, result.output
    [message] = (tmp_path / "broker").rglob("*.msg")
    args_sent = json.loads(base64.b64decode(json.loads(message.read_text())["body"]))[0]
    [candidate] = args_sent[2]
    assert candidate["content"] == "renewal in March"
