"""The `nightshift` command line. Every flag has a NIGHTSHIFT_* twin, shown in --help."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import NoReturn

import amqp.exceptions
import kombu.exceptions

from memory.storable import unstorable

# Importing a command module registers its commands on main_group.
from workers.cli import (
    given_up_cmds,  # noqa: F401
    maintain_cmds,  # noqa: F401
    memory_cmds,  # noqa: F401
    memory_edit_cmds,  # noqa: F401
    ops_cmds,  # noqa: F401
    runs_cmds,  # noqa: F401
    schedule_cmds,  # noqa: F401
    system_cmds,  # noqa: F401
)
from workers.cli.base import (
    EXIT_INVALID_INPUT,
    EXIT_UNAVAILABLE,
    broker_refused,
    echo,
    main_group,
    refusal,
)
from workers.enqueue import RunsNotSentError


def main() -> None:
    if (position := first_not_utf8(sys.argv[1:])) is not None:
        # The OS handed over bytes that are not UTF-8 (Python keeps them as lone
        # surrogates): no store can keep or match them, so say so here, once.
        shown = sys.argv[position]
        echo(f"Error: argument {position} ({shown!r}) is not valid UTF-8", err=True)
        sys.exit(EXIT_INVALID_INPUT)
    try:
        sys.exit(main_group.main(prog_name="nightshift", standalone_mode=True))
    except (kombu.exceptions.OperationalError, amqp.exceptions.AMQPError) as error:
        keys = error.keys if isinstance(error, RunsNotSentError) else []
        if (said := refusal(error)) is not None:
            # The broker answered and said no: a wrong user or password, a vhost or a
            # Redis database that is not there. (kombu passes RabbitMQ's unwrapped.)
            broker_failed(broker_refused(said), "accepts them", keys)
        # The broker did not answer a send: say which, not a traceback. A run the
        # command recorded first stays queued, and the reaper sends it later.
        broker_failed(f"cannot reach the broker ({error})", "answers", keys)


def broker_failed(what: str, until: str, keys: Sequence[str] = ()) -> NoReturn:
    """Exit 4 saying what the broker did and, when the command recorded runs it could
    not send, which: they are queued, and will run without another command."""
    if keys:
        shown = ", ".join(keys[:10]) + (f" and {len(keys) - 10} more" if len(keys) > 10 else "")
        later = (
            f"Recorded, not sent: {shown}. Nothing more to do: once the broker {until},"
            " the reaper (a beat and a worker running) sends a run queued longer than"
            " NIGHTSHIFT_REQUEUE_AFTER"
        )
    else:
        later = f"Runs already recorded stay queued; the reaper sends them once the broker {until}"
    echo(f"Error: {what}. {later}", err=True)
    sys.exit(EXIT_UNAVAILABLE)


def first_not_utf8(args: Sequence[str]) -> int | None:
    """The 1-based position of the first argument that is not valid UTF-8, if any."""
    for position, arg in enumerate(args, start=1):
        if unstorable(arg):  # argv cannot hold a NUL: only a lone surrogate is possible
            return position
    return None
