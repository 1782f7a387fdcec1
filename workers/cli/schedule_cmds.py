"""`nightshift schedules …`: apply schedule files to the database and list them."""

from __future__ import annotations

import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import click

from schedules import catalog, timing
from schedules.catalog import Action
from schedules.files import LoadResult, ScheduleError, load_path
from workers.agents import known_agents
from workers.cli.base import (
    EXIT_INVALID_INPUT,
    Context,
    connect,
    emit_json,
    emit_table,
    json_option,
    main_group,
    pass_context,
)
from workers.runtime import Runtime


@main_group.group()
def schedules() -> None:
    """Schedules: definitions in files, applied to the database, fired by beat."""


@schedules.command("apply")
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--dry-run", is_flag=True, help="Print the changes without making them.")
@click.option(
    "--prune/--no-prune", default=True, help="Delete applied schedules that are not in PATH."
)
@json_option
@pass_context
def apply_cmd(obj: Context, path: Path, dry_run: bool, prune: bool, as_json: bool) -> None:
    """Make the applied schedules match the files under PATH."""
    code = apply_path(connect(obj), path, dry_run=dry_run, prune=prune, as_json=as_json)
    sys.exit(code)


def apply_path(rt: Runtime, path: Path, *, dry_run: bool, prune: bool, as_json: bool) -> int:
    """Apply `path`; print the diff and every error. Returns the exit code.

    A file with errors never deletes anything: its good schedules are applied,
    pruning is skipped, and the exit code says something was wrong.
    """
    result = _with_agent_check(load_path(path), known_agents(rt.settings.agents))
    prune = prune and not result.errors
    with rt.engine.begin() as conn:
        if dry_run:
            changes = catalog.plan(conn, result.schedules, prune=prune)
        else:
            changes = catalog.apply(conn, result.schedules, datetime.now(UTC), prune=prune)
    if as_json:
        emit_json(
            {
                "dry_run": dry_run,
                "pruned": prune,
                "changes": [
                    {"name": c.name, "action": c.action.value, "source": c.source} for c in changes
                ],
                "errors": [str(e) for e in result.errors],
            }
        )
    else:
        verb = "would " if dry_run else ""
        for change in changes:
            if change.action is not Action.UNCHANGED:
                click.echo(
                    f"{verb}{change.action.value} {change.name}"
                    f"{'  (' + change.source + ')' if change.source else ''}"
                )
        unchanged = sum(c.action is Action.UNCHANGED for c in changes)
        click.echo(
            f"schedules from {path}: {len(changes) - unchanged} changed, {unchanged} unchanged"
        )
        for error in result.errors:
            click.echo(f"error: {error}", err=True)
        if result.errors:
            click.echo("nothing was deleted because of the errors above", err=True)
    return EXIT_INVALID_INPUT if result.errors else 0


def _with_agent_check(result: LoadResult, agents: dict[str, str]) -> LoadResult:
    good, errors = [], list(result.errors)
    for s in result.schedules:
        if s.agent in agents:
            good.append(s)
            continue
        file, _, line = s.source.rpartition(":")
        errors.append(
            ScheduleError(
                file=file or s.source,
                line=int(line) if line.isdigit() else None,
                schedule=s.name,
                field="agent",
                message=f"unknown agent {s.agent!r}; configured agents: "
                f"{', '.join(sorted(agents))}",
            )
        )
    return replace(result, schedules=tuple(good), errors=tuple(errors))


@schedules.command("list")
@json_option
@pass_context
def list_cmd(obj: Context, as_json: bool) -> None:
    """Applied schedules with their next fire time."""
    rt = connect(obj)
    now = datetime.now(UTC)
    with rt.engine.connect() as conn:
        applied = catalog.all_schedules(conn)
    rows = []
    for a in applied:
        nxt = None if a.paused else timing.next_fire(a.schedule, now)
        rows.append(
            {
                "name": a.name,
                "kind": a.schedule.kind,
                "agent": a.schedule.agent,
                "paused": a.paused,
                "pause_note": a.pause_note,
                "next_fire": nxt.isoformat() if nxt else None,
                "last_fire": a.last_fire_at.isoformat() if a.last_fire_at else None,
                "runs_fired": a.runs_fired,
                "source": a.schedule.source,
            }
        )
    if as_json:
        emit_json(rows)
        return
    emit_table(
        ["name", "kind", "agent", "next fire", "last fire", "fired", "paused"],
        [
            [
                r["name"],
                r["kind"],
                r["agent"],
                r["next_fire"] or "-",
                r["last_fire"] or "-",
                r["runs_fired"],
                r["pause_note"] or "yes" if r["paused"] else "",
            ]
            for r in rows
        ],
        empty="no schedules applied (nightshift schedules apply PATH)",
    )
