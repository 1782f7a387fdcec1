"""NIGHTSHIFT_MEMORY_TTL reaches every load on real databases: a run's, the CLI's —
at once, without an expire pass — and a load under per-kind TTLs is still one
statement, prepared once on PostgreSQL.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from sqlalchemy import Engine, select

from memory import expiry, queries
from memory.expiry import TtlConfig
from memory.records import Candidate, Kind, Memory, Provenance, Scope, Source
from memory.store import Store
from memory.tables import memories
from tests.clock import Clock
from tests.integration.sql_watch import Statements
from workers import runs
from workers.cli import main_group
from workers.lifecycle import execute
from workers.runs import RunRequest
from workers.runtime import Runtime
from workers.settings import Settings, SettingsError

pytestmark = pytest.mark.integration

ONCALL = Scope("demo", "oncall", "quiet")


def quiet(ctx: Any) -> None:
    """An agent that only reads: the run records what it was given."""


def wrote(engine: Engine, days_ago: int, content: str, kind: Kind, scope: Scope = ONCALL) -> str:
    """Store one memory last reinforced `days_ago` days before now; its id."""
    at = datetime.now(UTC) - timedelta(days=days_ago)
    store = Store(engine, clock=lambda: at)
    provenance = Provenance(Source.STATED, task_id=content, run_id=content, agent=scope.agent)
    receipt = store.apply(
        [Candidate(scope, kind, content, provenance)], handle=f"h:{content}", actor="writer"
    )
    [decision] = receipt.decisions
    assert decision.memory_id is not None, decision
    return decision.memory_id


def loaded_by_a_run(
    database_url: str, tmp_path: Path, environ: dict[str, str], key: str
) -> set[str]:
    settings = Settings.from_env(
        {
            "NIGHTSHIFT_DATA_DIR": str(tmp_path / "data"),
            "NIGHTSHIFT_DATABASE_URL": database_url,
            "NIGHTSHIFT_AGENTS": "quiet=tests.integration.test_ttl_load:quiet",
            **environ,
        }
    )
    rt = Runtime(settings)
    try:
        with rt.engine.begin() as conn:
            request = RunRequest(
                key=key,
                agent=ONCALL.agent,
                tenant=ONCALL.tenant,
                user=ONCALL.user,
                goal="renewal",
                trigger_origin="private",
            )
            runs.create(conn, [request], datetime.now(UTC))
        outcome = execute(rt, key, submit=lambda *a, **k: None, clock=lambda: datetime.now(UTC))
        assert outcome.status == "succeeded", outcome
        with rt.engine.connect() as conn:
            run = runs.get(conn, key)
        assert run is not None
        return set(run.loaded_ids)
    finally:
        rt.engine.dispose()


def test_a_run_loads_with_the_configured_ttl(
    engine: Engine, database_url: str, tmp_path: Path
) -> None:
    episode = wrote(engine, 31, "renewal call went well", Kind.EPISODE)
    recent_fact = wrote(engine, 31, "renewal is due in May", Kind.FACT)
    old_fact = wrote(engine, 100, "renewal owner is Ana", Kind.FACT)
    configured = {"NIGHTSHIFT_MEMORY_TTL": "default=120;episode=30"}
    assert loaded_by_a_run(database_url, tmp_path, configured, "ttl@1") == {recent_fact, old_fact}
    assert loaded_by_a_run(database_url, tmp_path, {}, "ttl@2") == {episode, recent_fact}


def cli(database_url: str, environ: dict[str, str], *args: str) -> Result:
    flags = ["--tenant", ONCALL.tenant, "--user", ONCALL.user, "--agent", ONCALL.agent]
    return CliRunner().invoke(
        main_group,
        ["--database-url", database_url, "memory", *args, *flags, "--json"],
        env=environ,
    )


def test_cli_load_and_search_use_the_configured_ttl(engine: Engine, database_url: str) -> None:
    wrote(engine, 31, "renewal call went well", Kind.EPISODE)
    wrote(engine, 31, "renewal is due in May", Kind.FACT)
    configured = {"NIGHTSHIFT_MEMORY_TTL": "episode=30"}
    result = cli(database_url, configured, "load", "--goal", "renewal")
    assert result.exit_code == 0, result.output
    assert [m["content"] for m in json.loads(result.output)["ranked"]] == ["renewal is due in May"]
    result = cli(database_url, configured, "search", "renewal")
    assert [m["content"] for m in json.loads(result.output)] == ["renewal is due in May"]
    result = cli(database_url, {}, "search", "renewal")
    assert len(json.loads(result.output)) == 2


def test_a_malformed_ttl_is_refused_naming_the_variable(database_url: str) -> None:
    result = cli(database_url, {"NIGHTSHIFT_MEMORY_TTL": "episode=3"}, "load")
    assert result.exit_code == 3
    assert "NIGHTSHIFT_MEMORY_TTL='episode=3'" in result.output
    assert "allowed is 7–180 days" in result.output
    with pytest.raises(SettingsError, match="NIGHTSHIFT_MEMORY_TTL='fact=soon'"):
        Settings.from_env({"NIGHTSHIFT_MEMORY_TTL": "fact=soon"})


def test_a_load_with_per_kind_ttls_is_one_statement_prepared_once(engine: Engine) -> None:
    clock = Clock(datetime.now(UTC))
    ttl = TtlConfig.parse("default=60;episode=30;private/fact=120;tenant=180")
    store = Store(engine, clock=clock, ttl=ttl)
    wrote(engine, 100, "renewal owner is Ana", Kind.FACT, Scope("acme", "ana", "triage"))
    wrote(engine, 100, "renewal shared note", Kind.FACT, Scope("acme", "ana"))
    ana = Scope("acme", "ana", "triage")
    first = store.load(ana, goal="renewal")  # on PostgreSQL this one also prepares
    assert [m.content for m in first.ranked] == ["renewal owner is Ana"]
    clock.advance(hours=1)  # another `now`: the same statement, new parameters
    with Statements() as statements:
        again = store.load(ana, goal="renewal")
    assert again == first
    expected = "EXECUTE" if engine.dialect.name == "postgresql" else "SELECT"
    assert [s for s in statements.seen if s not in ("BEGIN", "PRAGMA")] == [expected]
    clock.advance(days=21)  # 121 days: past private/fact=120 too
    assert len(store.load(ana, goal="renewal")) == 0


TTL_SPECS = [
    "",
    "default=120",
    "episode=30",
    "private/fact=120",
    "default=60;episode=14;tenant=180;private/fact=30",
    "shared=7;agent=180;goal=45;agent/goal=7;tenant/episode=90",
]
AGES = [6.9, 7, 7.1, 14, 14.1, 29, 30, 31, 45, 45.1, 59, 61, 89.9, 90, 90.1, 119, 121, 179, 181]


def test_the_sql_ttl_rule_agrees_with_the_record_rule(engine: Engine) -> None:
    """`within_ttl` (literal and parameter cutoffs) against `is_expired`, for every layer
    and kind on both sides of each TTL."""
    now = datetime.now(UTC)
    layers = [
        Scope("acme", "ana", "triage"),
        Scope("acme", "ana"),
        Scope("acme", "", "triage"),
        Scope("acme"),
    ]
    for age in AGES:
        store = Store(engine, clock=lambda age=age: now - timedelta(days=age))
        store.apply(
            [
                Candidate(
                    scope,
                    kind,
                    f"{kind.value} {age} days in {scope}",
                    Provenance(Source.OPERATOR, task_id=f"{age}", agent=scope.agent),
                )
                for scope in layers
                for kind in Kind
            ],
            handle=f"h{age}",
            actor="operator",
        )
    with engine.connect() as conn:
        every = [Memory.from_row(r) for r in conn.execute(select(*queries.ROW)).mappings()]
        assert len(every) == len(AGES) * len(layers) * len(Kind)
        for spec in TTL_SPECS:
            ttl = TtlConfig.parse(spec)
            expected = {m.id for m in every if not expiry.is_expired(m, now, ttl)}
            by_literal = select(memories.c.id).where(
                expiry.within_ttl(ttl, expiry.literal_cutoff(now))
            )
            by_param = select(memories.c.id).where(expiry.within_ttl(ttl, expiry.cutoff_param))
            assert set(conn.execute(by_literal).scalars()) == expected, spec
            params = expiry.cutoff_values(now, ttl)
            assert set(conn.execute(by_param, params).scalars()) == expected, spec
            expired = select(memories.c.id).where(expiry.expired_clause(now, ttl))
            assert set(conn.execute(expired).scalars()) == {m.id for m in every} - expected
