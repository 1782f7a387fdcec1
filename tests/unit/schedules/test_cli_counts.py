"""`schedules next -n` and `show -n` are checked by click before any database is
opened: a count outside 1-1000 is a usage error (exit 2) that says the range."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from schedules.api import MAX_FIRES, Schedules
from schedules.catalog import AppliedSchedule
from schedules.definition import Cron, Schedule
from workers.cli import main_group


@pytest.mark.parametrize("command", ["next", "show"])
@pytest.mark.parametrize("count", ["-5", "0", str(MAX_FIRES + 1), str(10**9), "ten"])
def test_a_count_outside_the_range_is_a_usage_error(command: str, count: str) -> None:
    result = CliRunner().invoke(
        main_group,
        [
            "--database-url",
            "sqlite:////nonexistent/never-opened.db",
            "schedules",
            command,
            "x",
            "-n",
            count,
        ],
    )
    assert result.exit_code == 2, result.output
    assert "Invalid value for '-n'" in result.stderr
    if count.lstrip("-").isdigit():
        assert f"1<=x<={MAX_FIRES}" in result.stderr


def test_the_range_is_in_the_help() -> None:
    result = CliRunner().invoke(main_group, ["schedules", "next", "--help"])
    assert f"How many (1-{MAX_FIRES})" in result.output


def test_the_api_keeps_the_same_bound() -> None:
    applied = AppliedSchedule(
        Schedule(name="x", agent="a", tenant="t", trigger=Cron("* * * * *")),
        paused=False,
        pause_note="",
        revision=1,
        last_fire_at=None,
        runs_fired=0,
        deleted=False,
    )
    api = Schedules(engine=None, runs=None, clock=lambda: datetime(2026, 1, 1, tzinfo=UTC))  # type: ignore[arg-type]
    assert len(api.next_for(applied, MAX_FIRES)) == MAX_FIRES
    for bad in (-1, MAX_FIRES + 1):
        with pytest.raises(ValueError, match=f"from 0 to {MAX_FIRES}"):
            api.next_for(applied, bad)
