"""The options `nightshift flower` gives Flower, and which stay off its command line."""

from __future__ import annotations

from pathlib import Path

from workers.flower import command_line, options
from workers.settings import Settings


def test_the_rabbitmq_management_api_goes_to_flower_but_not_onto_its_command_line(
    tmp_path: Path,
) -> None:
    api = "http://ops:s3cret@rabbit:15672/api/"
    settings = Settings(data_dir=tmp_path, flower_basic_auth="ops:Pa55word", flower_broker_api=api)
    assert options(settings)["broker_api"] == api
    shown = " ".join(command_line(settings))  # what `ps` shows any user of the machine
    assert "s3cret" not in shown and "Pa55word" not in shown
    assert "broker_api" not in options(Settings(data_dir=tmp_path))
