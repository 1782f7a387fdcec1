"""One lease renewer per process keeps the leases of the runs it works on."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from memory.engine import open_engine
from workers import runs, schema
from workers.leases import LeaseRenewer
from workers.runs import RunRequest
from workers.tables import runs as run_table

pytestmark = pytest.mark.integration

LEASE = timedelta(seconds=0.6)  # renewed every 0.2 s


@pytest.fixture
def engine(database_url: str, tmp_path: Path) -> Iterator[Engine]:
    engine = open_engine(database_url)
    schema.upgrade(engine)
    yield engine
    engine.dispose()


def claimed(engine: Engine, key: str, owner: str) -> datetime:
    now = datetime.now(UTC)
    with engine.begin() as conn:
        runs.create(conn, [RunRequest(key=key, agent="a", tenant="t")], now)
        assert runs.claim(conn, key, owner, now, LEASE) is not None
    found = lease_of(engine, key)
    assert found is not None
    return found


def lease_of(engine: Engine, key: str) -> datetime | None:
    with engine.connect() as conn:
        found: datetime | None = conn.execute(
            select(run_table.c.lease_expires_at).where(run_table.c.key == key)
        ).scalar_one()
    return found


def wait_for(what: str, check: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def test_held_leases_are_renewed_until_released(engine: Engine) -> None:
    renewer = LeaseRenewer(engine)
    first = claimed(engine, "r@1", "me")
    with renewer.hold("r@1", "me", LEASE, lambda: datetime.now(UTC)):
        wait_for("a renewal", lambda: (lease_of(engine, "r@1") or first) > first)
        wait_for("a second renewal", lambda: (lease_of(engine, "r@1") or first) > first + LEASE)
    assert "r@1" not in renewer._held  # released: the renewer no longer touches it


def test_a_lost_lease_is_no_longer_renewed(engine: Engine) -> None:
    renewer = LeaseRenewer(engine)
    claimed(engine, "r@2", "someone-else")
    with renewer.hold("r@2", "me", LEASE, lambda: datetime.now(UTC)):
        wait_for("the renewer to give up the lease it does not hold", lambda: not renewer._held)
