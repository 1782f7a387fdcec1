"""docker-compose.yml cannot be started here (no Docker engine); check what can be:
every long-running service has a healthcheck, and every nightshift command it runs
is a real command of the CLI."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from workers.cli import main_group

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"


def services() -> dict[str, dict]:
    return yaml.safe_load(COMPOSE.read_text())["services"]


def test_every_long_running_service_has_a_healthcheck() -> None:
    missing = [
        name for name, s in services().items() if name != "migrate" and "healthcheck" not in s
    ]
    assert missing == []


def test_every_nightshift_command_in_compose_exists() -> None:
    runner = CliRunner()
    for name, service in services().items():
        command = service.get("command")
        if not command or "ops/Dockerfile" not in str(service.get("build", "")):
            continue
        words = [w for w in command if not w.startswith("-")]
        result = runner.invoke(main_group, [*words[:2], "--help"])
        assert result.exit_code == 0, (
            f"service {name}: nightshift {' '.join(words)}: {result.output}"
        )
