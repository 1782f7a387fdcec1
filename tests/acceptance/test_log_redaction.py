"""A secret in an agent's exception reaches neither the run record nor the worker's log."""

from __future__ import annotations

import json

import pytest

from tests.acceptance.agents import LEAKED_TOKEN as TOKEN
from tests.acceptance.harness import System

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.parametrize("system", ["embedded"], indirect=True),
]


def test_a_failed_runs_traceback_in_the_worker_log_is_redacted(system: System) -> None:
    system.env["NIGHTSHIFT_AGENTS"] = "leaker=tests.acceptance.agents:leaker"
    system.start("worker")
    result = system.cli("trigger", "leaker", "--tenant", "acme", "--wait", "--json")
    assert result.returncode == 1, result.stdout + result.stderr
    run = json.loads(result.stdout)["run"]
    assert run["status"] == "failed" and TOKEN not in run["error"], run
    log = (system.root / "worker.log").read_text()
    assert "run failed" in log and "Traceback" in log  # the traceback is there, redacted
    assert "login refused for token [REDACTED:github_token]" in log
    assert TOKEN not in log
