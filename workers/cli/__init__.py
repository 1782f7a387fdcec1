"""The `nightshift` command line. Every flag has a NIGHTSHIFT_* twin, shown in --help."""

from __future__ import annotations

import sys

# Importing a command module registers its commands on main_group.
from workers.cli import (
    maintain_cmds,  # noqa: F401
    memory_cmds,  # noqa: F401
    memory_edit_cmds,  # noqa: F401
    ops_cmds,  # noqa: F401
    runs_cmds,  # noqa: F401
    schedule_cmds,  # noqa: F401
    system_cmds,  # noqa: F401
)
from workers.cli.base import main_group


def main() -> None:
    sys.exit(main_group.main(prog_name="nightshift", standalone_mode=True))
