"""`nightshift memory write --wait` goes through the real writer queue and gate."""

from __future__ import annotations

import json

import pytest

from tests.acceptance.harness import System

pytestmark = pytest.mark.acceptance

ANA = ["--tenant", "acme", "--user", "ana", "--agent", "triage"]


def test_operator_write_passes_the_gate_and_prints_the_receipt(system: System) -> None:
    system.start("writer")
    said = system.cli(
        "memory",
        "write",
        *ANA,
        "--source",
        "stated",
        "--key",
        "renewal",
        "--content",
        "renewal is on 2027-03-01",
        "--wait",
        "--timeout",
        "90",
        "--json",
    )
    assert said.returncode == 0, said.stdout + said.stderr
    receipt = json.loads(said.stdout)
    assert receipt["counts"] == {"stored": 1}
    secret = system.cli(
        "memory",
        "write",
        *ANA,
        "--content",
        "db password=Tr0ub4dor&3xyz",
        "--wait",
        "--timeout",
        "90",
        "--json",
    )
    assert secret.returncode == 3, secret.stdout + secret.stderr  # refused: scripts see it
    [decision] = json.loads(secret.stdout)["decisions"]
    assert (decision["outcome"], decision["rule"]) == ("refused", "secret")
    system.stop()
    assert "Tr0ub4dor" not in secret.stdout + system.logs()
    shown = system.cli("memory", "show", *ANA, "--all", "--json")
    assert [m["content"] for m in json.loads(shown.stdout)] == ["renewal is on 2027-03-01"]
