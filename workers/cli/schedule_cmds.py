"""`nightshift schedules …`: apply schedule files, and look at, pause, trigger and
backfill applied schedules. The operations are `schedules.api.Schedules`; this
module parses flags and prints."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import click

from memory.secrets import find_secrets_as_read
from schedules import catalog
from schedules.api import (
    MAX_FIRES,
    BackfillRangeError,
    BackfillTooLargeError,
    FireResult,
    Schedules,
    not_firing,
    zone_of,
)
from schedules.catalog import Action, AppliedSchedule, Change, ScheduleNotFoundError
from schedules.definition import DefinitionError, Overlap, Schedule, format_duration
from schedules.files import LoadResult, ScheduleError, load_path
from workers.agents import known_agents
from workers.app import create_app
from workers.beat import schedules_api
from workers.cli.base import (
    EXIT_INVALID_INPUT,
    Context,
    InvalidInput,
    connect,
    echo,
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
@click.option(
    "--allow-empty",
    is_flag=True,
    help="Apply even when PATH holds no schedules, deleting every applied one.",
)
@json_option
@pass_context
def apply_cmd(
    obj: Context, path: Path, dry_run: bool, prune: bool, allow_empty: bool, as_json: bool
) -> None:
    """Make the applied schedules match the files under PATH."""
    code = apply_path(
        connect(obj, create=True),
        path,
        dry_run=dry_run,
        prune=prune,
        as_json=as_json,
        allow_empty=allow_empty,
    )
    sys.exit(code)


ERRORS_SHOWN = 50
"""Errors `apply` prints before it counts the rest: one mistake in a generated file
repeats in every schedule, and 50,000 lines hide the one that says what happened."""


def apply_path(
    rt: Runtime, path: Path, *, dry_run: bool, prune: bool, as_json: bool, allow_empty: bool = False
) -> int:
    """Apply `path`; print the diff and the errors (the first `ERRORS_SHOWN`, then
    how many more; `--json` lists every one). Returns the exit code.

    A file with errors never deletes anything: its good schedules are applied,
    pruning is skipped, and the exit code says something was wrong. A PATH with no
    schedules at all (an empty or mistyped folder, only other files) changes nothing
    unless `allow_empty`, when pruning would otherwise delete every applied schedule.
    """
    result = _with_refusals(load_path(path), known_agents(rt.settings.agents))
    _warn_skipped(result.skipped)
    prune = prune and not result.errors
    with rt.engine.begin() as conn:
        emptied = [] if result.schedules or allow_empty else catalog.plan(conn, [], prune=prune)
        if emptied:
            refusal = (
                f"no schedules found in {path}; applying it would delete all "
                f"{len(emptied)} applied schedules, so nothing was changed. Check the path, "
                "or pass --allow-empty to delete them all."
            )
            echo(f"error: {refusal}", err=True)
            if as_json:
                _emit_applied(dry_run, False, [], [*map(str, result.errors), refusal], result)
            return EXIT_INVALID_INPUT
        if dry_run:
            changes = catalog.plan(conn, result.schedules, prune=prune)
        else:  # apply plans as it goes: planning here as well compared everything twice
            changes = catalog.apply(conn, result.schedules, datetime.now(UTC), prune=prune)
    wanted = {s.name: s for s in result.schedules}
    edits = {
        c.name: changed_fields(c.before, wanted[c.name].to_json())
        for c in changes
        if c.before is not None
    }
    if as_json:
        _emit_applied(dry_run, prune, changes, [str(e) for e in result.errors], result, edits)
    else:
        verb = "would " if dry_run else ""
        for change in changes:
            if change.action is not Action.UNCHANGED:
                edit = "; ".join(
                    f"{field} {_cut(old)} -> {_cut(new)}"
                    for field, (old, new) in edits.get(change.name, {}).items()
                )
                echo(
                    f"{verb}{change.action.value} {change.name}"
                    f"{'  (' + change.source + ')' if change.source else ''}"
                    f"{': ' + edit if edit else ''}"
                )
        unchanged = sum(c.action is Action.UNCHANGED for c in changes)
        changed = "would change" if dry_run else "changed"
        echo(f"schedules from {path}: {len(changes) - unchanged} {changed}, {unchanged} unchanged")
        for error in result.errors[:ERRORS_SHOWN]:
            echo(f"error: {error}", err=True)
        if len(result.errors) > ERRORS_SHOWN:
            echo(
                f"… and {len(result.errors) - ERRORS_SHOWN:,} more errors"
                f" ({len(result.errors):,} in all; --json lists every one)",
                err=True,
            )
        if result.errors:
            echo("nothing was deleted because of the errors above", err=True)
    return EXIT_INVALID_INPUT if result.errors else 0


def changed_fields(before: dict[str, Any], after: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """What an update changes, field by field as `show` prints them: `{"heartbeat":
    ("2h", "2h5m")}`; "-" for a field one side leaves at its empty default."""
    old, new = dict(definition_fields(before)), dict(definition_fields(after))
    return {
        field: (old.get(field, "-"), new.get(field, "-"))
        for field in [*new, *(f for f in old if f not in new)]
        if field != "source" and old.get(field) != new.get(field)
    }


def _cut(value: str, width: int = 40) -> str:
    return value if len(value) <= width else value[: width - 1] + "…"


def _emit_applied(
    dry_run: bool,
    pruned: bool,
    changes: list[Change],
    errors: list[str],
    result: LoadResult,
    edits: dict[str, dict[str, tuple[str, str]]] | None = None,
) -> None:
    """`apply --json`'s one document, also when nothing was applied. An update lists
    what it changes under `changed`: `{field: [before, after]}`."""
    edits = edits or {}
    emit_json(
        {
            "dry_run": dry_run,
            "pruned": pruned,
            "changes": [
                {"name": c.name, "action": c.action.value, "source": c.source}
                | ({"changed": edits[c.name]} if c.name in edits else {})
                for c in changes
            ],
            "errors": errors,
            "skipped_files": list(result.skipped),
        }
    )


def _warn_skipped(skipped: tuple[str, ...]) -> None:
    if not skipped:
        return
    shown = ", ".join(skipped[:5]) + (f" and {len(skipped) - 5} more" if len(skipped) > 5 else "")
    echo(
        f"warning: skipped {len(skipped)} file(s) not ending in .toml, .yaml or .yml: {shown}",
        err=True,
    )


def _with_refusals(result: LoadResult, agents: dict[str, str]) -> LoadResult:
    """`result` with the schedules refused for what only the composition root can
    check (`schedules/` knows neither the agents nor `memory.secrets`) moved to its
    errors, each naming the schedule's file and line."""
    good, errors = [], list(result.errors)
    for s in result.schedules:
        problems = _refusals(s, agents)
        if not problems:
            good.append(s)
            continue
        file, _, line = s.source.rpartition(":")
        errors += [
            ScheduleError(
                file=file or s.source,
                line=int(line) if line.isdigit() else None,
                schedule=s.name,
                field=field,
                message=message,
            )
            for field, message in problems
        ]
    return replace(result, schedules=tuple(good), errors=tuple(errors))


def _refusals(s: Schedule, agents: dict[str, str]) -> list[tuple[str, str]]:
    """(field, message) for an unknown agent and for each text field holding a secret."""
    problems = []
    if s.agent not in agents:
        configured = ", ".join(sorted(agents))
        problems.append(("agent", f"unknown agent {s.agent!r}; configured agents: {configured}"))
    for field, text in (
        ("goal", s.goal),
        ("pause_note", s.pause_note),
        ("payload", json.dumps(s.payload, ensure_ascii=False) if s.payload else ""),
    ):
        if found := find_secrets_as_read(text):
            kinds = ", ".join(sorted({f.kind for f in found}))
            problems.append(
                (
                    field,
                    f"{field} holds a secret ({kinds}); a definition is stored and shown by "
                    "`schedules show`: give the agent a name to look the secret up by "
                    "(an environment variable, a secret store key) instead",
                )
            )
    return problems


def _api(obj: Context) -> Schedules:
    rt = connect(obj)
    return schedules_api(create_app(rt.settings), rt.engine, actor="cli")


def _get(api: Schedules, name: str) -> AppliedSchedule:
    try:
        return api.get(name)
    except ScheduleNotFoundError as error:
        raise InvalidInput(str(error)) from None


class InstantType(click.ParamType):
    """An ISO 8601 date-time with a UTC offset (`2026-03-01T00:00:00+01:00`, `…Z`)."""

    name = "DATETIME"

    def convert(self, value: Any, param: Any, ctx: Any) -> datetime:
        if isinstance(value, datetime):
            return value
        try:
            parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError:
            self.fail(f"{value!r} is not an ISO 8601 date-time", param, ctx)
        if parsed.tzinfo is None:
            self.fail(f"{value!r} has no UTC offset; add one, e.g. {value}Z", param, ctx)
        return parsed


OVERLAP = click.Choice([o.value for o in Overlap])
FIRES = click.IntRange(1, MAX_FIRES)


def _row(a: AppliedSchedule, upcoming: datetime | None) -> dict[str, Any]:
    last = a.last_fire_at.astimezone(zone_of(a.schedule)) if a.last_fire_at else None
    return {
        "name": a.name,
        "kind": a.schedule.kind,
        "agent": a.schedule.agent,
        "paused": a.paused,
        "pause_note": a.pause_note,
        "next_fire": upcoming.isoformat() if upcoming else None,
        "not_firing": not_firing(a) or None,
        "last_fire": last.isoformat() if last else None,
        "runs_fired": a.runs_fired,
        "source": a.schedule.source,
    }


@schedules.command("list")
@click.option(
    "--name",
    "name_glob",
    metavar="GLOB",
    help="Only names matching this shell-style pattern, case-insensitive: "
    "'*' any characters, '?' one (e.g. 'digest-*'; without either, the exact name).",
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    metavar="N",
    help="At most N schedules, in name order.  [default: all]",
)
@json_option
@pass_context
def list_cmd(obj: Context, name_glob: str | None, limit: int | None, as_json: bool) -> None:
    """Applied schedules with their next and last fire times, each in the schedule's
    own time zone (the offset is part of every time)."""
    api = _api(obj)
    found = api.all(name_glob=name_glob, limit=None if limit is None else limit + 1)
    if limit is not None and len(found) > limit:
        found = found[:limit]
        echo(
            f"showing the first {limit} schedules; more match (raise --limit or narrow --name)",
            err=True,
        )
    rows = [_row(a, at) for a, at in zip(found, api.first_fires(found), strict=True)]
    if as_json:
        emit_json(rows)
        return
    emit_table(
        [
            "name",
            "kind",
            "agent",
            "next fire (its zone)",
            "last fire (its zone)",
            "fired",
            "paused",
        ],
        [
            [
                r["name"],
                r["kind"],
                r["agent"],
                r["next_fire"] or (f"none: {r['not_firing']}" if r["not_firing"] else "-"),
                r["last_fire"] or "-",
                r["runs_fired"],
                (r["pause_note"] or "yes") if r["paused"] else "",
            ]
            for r in rows
        ],
        empty=f"no applied schedule matches {name_glob!r}"
        if name_glob is not None
        else "no schedules applied (nightshift schedules apply PATH)",
    )


@schedules.command("show")
@click.argument("name")
@click.option(
    "-n",
    "count",
    type=FIRES,
    default=10,
    show_default=True,
    help=f"How many fires and runs (1-{MAX_FIRES}).",
)
@json_option
@pass_context
def show_cmd(obj: Context, name: str, count: int, as_json: bool) -> None:
    """One schedule: its definition, next fires, latest runs and fires that did not run."""
    api = _api(obj)
    _get(api, name)
    details = api.show(name, count)
    data = details.to_json()
    if as_json:
        emit_json(data)
        return
    a = details.applied
    echo(f"{a.name}  ({a.schedule.kind}, agent {a.schedule.agent}, tenant {a.schedule.tenant})")
    if a.paused:
        echo(f"  PAUSED: {a.pause_note or '(no note)'}")
    for field, value in definition_fields(data["definition"]):
        echo(f"  {field}: {value}")
    if data["last_fire"]:  # the timer's: trigger and backfill count neither
        echo(f"  last timer fire: {data['last_fire']}")
        echo(f"  runs fired by the timer: {a.runs_fired}")
    zone = zone_of(a.schedule)
    echo(f"next fires ({zone.key}):")
    for at in details.next_fires:
        echo(f"  {at.isoformat()}")
    if not details.next_fires:
        echo(f"  none: will not fire, {data['not_firing']}" if data["not_firing"] else "  none")
    echo("latest runs:")
    for run in details.runs:
        echo(f"  {run.key}  {run.status}  {run.note}".rstrip())
    if not details.runs:
        echo("  none yet")
    echo("fires that did not run:")
    for fire in details.not_run:
        span = fire.fire_time.astimezone(zone).isoformat()
        if fire.count > 1:
            last = fire.last_fire_time.astimezone(zone).isoformat() if fire.last_fire_time else ""
            span += f" .. {last} ({fire.count})"
        why = fire.reason.value if fire.reason else fire.outcome.value
        echo(f"  {span}  {why}  {fire.detail}".rstrip())
    if not details.not_run:
        echo("  none")


DURATIONS = ("catchup_window", "time_limit")


def definition_fields(definition: dict[str, Any]) -> list[tuple[str, str]]:
    """A stored definition (`Schedule.to_json`) as the fields and values of a schedule
    file (`cron`, `heartbeat`, `jitter`, `time_limit = 10m`), those left at an empty
    default out: what `show` prints. The stored form (a trigger object, seconds) is
    what `--json` gives."""
    shown: list[tuple[str, str]] = []
    for key, value in definition.items():
        if key in ("name", "agent", "tenant") or value in (None, "", {}, False):
            continue
        if key == "trigger":
            shown += _trigger_fields(value)
        elif key in DURATIONS:
            shown.append((key, format_duration(timedelta(seconds=value))))
        elif key == "payload":
            shown.append((key, json.dumps(value, ensure_ascii=False)))
        else:
            shown.append((key, str(value)))
    return shown


def _trigger_fields(trigger: dict[str, Any]) -> list[tuple[str, str]]:
    if trigger["kind"] == "cron":
        return [("cron", trigger["expression"]), ("timezone", trigger["timezone"])]
    if trigger["kind"] == "heartbeat":
        fields = [("heartbeat", format_duration(timedelta(seconds=trigger["every"])))]
        if trigger.get("jitter"):
            fields.append(("jitter", format_duration(timedelta(seconds=trigger["jitter"]))))
        if hours := trigger.get("active_hours"):
            fields.append(("active_hours", "-".join(t[:5] for t in hours)))
        return [*fields, ("timezone", trigger["timezone"])]
    return [("event", "true (runs only when triggered)")]


@schedules.command("next")
@click.argument("name")
@click.option(
    "-n", "count", type=FIRES, default=10, show_default=True, help=f"How many (1-{MAX_FIRES})."
)
@json_option
@pass_context
def next_cmd(obj: Context, name: str, count: int, as_json: bool) -> None:
    """The next N fire times of NAME, in its time zone; none, and why on stderr, while
    it will not fire (paused, or max_runs reached)."""
    api = _api(obj)
    why = not_firing(_get(api, name))
    if why:
        echo(f"{name} will not fire: {why}", err=True)
    times = [t.isoformat() for t in api.next(name, count)]
    if as_json:
        emit_json(times)
        return
    for t in times:
        echo(t)


@schedules.command("pause")
@click.argument("name")
@click.option("--note", default="", help="Why it is paused; shown in list and show.")
@json_option
@pass_context
def pause_cmd(obj: Context, name: str, note: str, as_json: bool) -> None:
    """Stop NAME from firing (its fires are recorded as paused) until `resume`."""
    api = _api(obj)
    _get(api, name)
    try:
        api.pause(name, note)
    except DefinitionError as error:
        raise click.BadParameter(str(error), param_hint="'--note'") from None
    _said(as_json, {"name": name, "paused": True, "note": note}, f"paused {name}")


@schedules.command("resume")
@click.argument("name")
@json_option
@pass_context
def resume_cmd(obj: Context, name: str, as_json: bool) -> None:
    """Let NAME fire again, from now on (fires during the pause are not caught up)."""
    api = _api(obj)
    _get(api, name)
    api.resume(name)
    _said(as_json, {"name": name, "paused": False}, f"resumed {name}")


@schedules.command("trigger")
@click.argument("name")
@click.option("--overlap", type=OVERLAP, help="Override the schedule's overlap policy.")
@json_option
@pass_context
def trigger_cmd(obj: Context, name: str, overlap: str | None, as_json: bool) -> None:
    """Run NAME now (subject to its overlap policy)."""
    api = _api(obj)
    applied = _get(api, name)
    result = api.trigger(name, overlap=Overlap(overlap) if overlap else None)
    _report(result, as_json, zone_of(applied.schedule))


@schedules.command("backfill")
@click.argument("name")
@click.option("--from", "start", type=InstantType(), required=True, help="First instant.")
@click.option("--to", "end", type=InstantType(), required=True, help="Last instant (inclusive).")
@click.option("--overlap", type=OVERLAP, help="Override the schedule's overlap policy.")
@json_option
@pass_context
def backfill_cmd(
    obj: Context, name: str, start: datetime, end: datetime, overlap: str | None, as_json: bool
) -> None:
    """Run the fires NAME had between --from and --to (not later than now). A fire
    that already ran is not run again (same run key)."""
    api = _api(obj)
    applied = _get(api, name)
    try:
        result = api.backfill(name, start, end, overlap=Overlap(overlap) if overlap else None)
    except (BackfillRangeError, BackfillTooLargeError) as error:
        raise InvalidInput(str(error)) from None
    _report(result, as_json, zone_of(applied.schedule))


def _said(as_json: bool, data: dict[str, Any], text: str) -> None:
    if as_json:
        emit_json(data)
    else:
        echo(text)


def _report(result: FireResult, as_json: bool, zone: ZoneInfo) -> None:
    """What a trigger or backfill did, fire times in the schedule's zone (`zone`)."""
    if as_json:
        emit_json(result.to_json())
        return
    for key in result.started:
        echo(f"started {key}")
    for key in result.existed:
        echo(f"already enqueued {key}")
    for key in result.cancelled:
        echo(f"cancelled {key}")
    if result.buffered:
        buffered = result.buffered.astimezone(zone).isoformat()
        echo(f"buffered {buffered} (runs when the current run finishes)")
    for record in result.skipped:
        why = record.reason.value if record.reason else ""
        at = record.fire_time.astimezone(zone).isoformat()
        echo(f"skipped {at}: {why} {record.detail}".rstrip())
    if not (result.started or result.existed or result.buffered or result.skipped):
        echo("no fires in that range")
