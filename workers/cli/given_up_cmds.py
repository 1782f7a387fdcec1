"""`nightshift memory given-up`: write batches the writer gave up, and acknowledging them.

A batch that took its writer down on every attempt is refused whole
(`writer-crashed`) and keeps `nightshift status` unhealthy for a day
(`workers.health.given_up_writes`). Once an operator has dealt with it (read its
receipt, found what crashed the writer, had the run's memory written again), `--ack`
records who acknowledged it and status is healthy again.
"""

from __future__ import annotations

import click

from workers import write_attempts
from workers.cli.base import (
    Context,
    InvalidInput,
    connect,
    echo,
    emit_json,
    emit_table,
    json_option,
    pass_context,
)
from workers.cli.memory_cmds import memory
from workers.cli.memory_edit_cmds import actor_option
from workers.maintenance import utcnow


@memory.command("given-up")
@click.option("--ack", "handles", multiple=True, help="Acknowledge this handle (repeatable).")
@click.option("--ack-all", is_flag=True, help="Acknowledge every one not acknowledged yet.")
@actor_option
@json_option
@pass_context
def given_up(
    obj: Context, handles: tuple[str, ...], ack_all: bool, actor: str, as_json: bool
) -> None:
    """Write batches given up after they crashed their writer; --ack once dealt with."""
    engine = connect(obj).engine
    if handles or ack_all:
        if handles and ack_all:
            raise InvalidInput("give --ack HANDLE or --ack-all, not both")
        on_record = {g.handle: g for g in write_attempts.given_up(engine)}
        if unknown := [h for h in handles if h not in on_record]:
            raise InvalidInput(
                f"no given-up write {', '.join(map(repr, unknown))} on record"
                " (`nightshift memory given-up` lists them); nothing was acknowledged"
            )
        marked = write_attempts.acknowledge(engine, handles or None, actor, utcnow())
        if as_json:
            emit_json({"acknowledged": marked})
            return
        for handle in handles:
            if handle not in marked:
                earlier = on_record[handle]
                echo(f"{handle} was acknowledged before, by {earlier.acknowledged_by}")
        echo(f"acknowledged {len(marked)} given-up write{'' if len(marked) == 1 else 's'}")
        return
    found = write_attempts.given_up(engine)
    if as_json:
        emit_json([g.to_json() for g in found])
        return
    emit_table(
        ["handle", "attempts", "given up", "acknowledged"],
        [
            [
                g.handle,
                g.attempts,
                f"{g.at:%Y-%m-%d %H:%M:%S}",
                f"{g.acknowledged_at:%Y-%m-%d %H:%M:%S} by {g.acknowledged_by}"
                if g.acknowledged_at
                else "no",
            ]
            for g in found
        ],
        empty="no given-up writes on record",
    )
