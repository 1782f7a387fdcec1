"""The `nightshift` command line. Every flag has a NIGHTSHIFT_* twin, shown in --help."""

from __future__ import annotations

import sys

from workers.cli import memory_cmds, runs_cmds, schedule_cmds, system_cmds  # noqa: F401  (register)
from workers.cli.base import main_group


def main() -> None:
    sys.exit(main_group.main(prog_name="nightshift", standalone_mode=True))
