"""`nightshift trigger` and `nightshift runs`."""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from memory.records import Scope
from memory.secrets import find_secrets_as_read
from memory.storable import scope_problems
from memory.store import MAX_ROWS
from schedules.definition import MAX_PAYLOAD_DEPTH, nesting_depth
from workers import runs, subagents
from workers.agents import UnknownAgentError, resolve
from workers.app import create_app
from workers.cli.base import (
    EXIT_ERROR,
    TRIGGER_ORIGINS,
    Context,
    InvalidInput,
    ShownError,
    connect,
    echo,
    emit_json,
    emit_table,
    json_option,
    main_group,
    not_empty,
    pass_context,
)
from workers.cli.watch import describe
from workers.enqueue import enqueue
from workers.runs import FINISHED, RUN_KEY_CHARS, Run, RunRequest, RunStatus, fit
from workers.runtime import Runtime


@main_group.command()
@click.argument("agent")
@click.option("--tenant", required=True, callback=not_empty, help="Tenant the run belongs to.")
@click.option("--user", default="", help="The person the run acts for (empty: none).")
@click.option(
    "--goal", default="", help="What the run should achieve; memory is ranked against it."
)
@click.option(
    "--payload",
    "payload_file",
    type=click.Path(path_type=Path, dir_okay=False, exists=True, allow_dash=True),
    help="JSON object file handed to the agent as untrusted event data ('-' for stdin).",
)
@click.option("--event-id", default="", help="Dedup key: the same event id makes one run.")
@click.option(
    "--origin",
    type=click.Choice(TRIGGER_ORIGINS),
    default="api",
    help="Where the trigger came from; user memory is loaded only for private ones.",
)
@click.option(
    "--wait",
    is_flag=True,
    help="Wait for the run to finish and print it; exit 1 unless it succeeded (or ended"
    " partial: done, some output refused).",
)
@json_option
@pass_context
def trigger(
    obj: Context,
    agent: str,
    tenant: str,
    user: str,
    goal: str,
    payload_file: Path | None,
    event_id: str,
    origin: str,
    wait: bool,
    as_json: bool,
) -> None:
    """Enqueue an event-triggered run of AGENT now."""
    settings = obj.settings
    try:
        resolve(agent, settings.agents)
    except UnknownAgentError as error:
        raise InvalidInput(str(error)) from None
    if problems := scope_problems(Scope(tenant, user, agent)):
        raise InvalidInput(f"{'; '.join(problems)}; nothing was enqueued")
    for option, value in (("--tenant", tenant), ("--user", user), ("--event-id", event_id)):
        if found := find_secrets_as_read(value):
            # The payload and goal are redacted; these make the run key, which is
            # kept whole (the run record, the broker, Flower, the logs, the results).
            kinds = ", ".join(sorted({f.kind for f in found}))
            raise InvalidInput(
                f"{option} holds a secret ({kinds}); it would be kept in the run key, the"
                " broker and the logs: name the event by an id, not a credential;"
                " nothing was enqueued"
            )
    payload = _read_payload(payload_file, settings.max_payload_bytes)
    rt = connect(obj, create=True)
    scope_key = f"{agent}/{tenant}/{user or '*'}"
    trigger = f"event:{event_id}" if event_id else f"manual:{uuid.uuid4()}"
    # A long event id is shortened with its hash: the same event still makes one run.
    key = fit("", f"{scope_key}@{trigger}", RUN_KEY_CHARS)
    request = RunRequest(
        key=key,
        agent=agent,
        tenant=tenant,
        user=user,
        goal=goal,
        trigger_kind="event" if event_id else "manual",
        trigger_origin=origin,
        fire_time=datetime.now(UTC),
        payload=payload,
        time_limit=settings.run_time_limit,
    )
    created = enqueue(create_app(settings), [request], datetime.now(UTC))
    result: dict[str, Any] = {
        "run_key": key,
        "enqueued": bool(created),
        "note": "" if created else "this event id was enqueued before; no new run",
    }
    finished = _wait_for(rt, key) if wait and created else None
    if finished is not None:
        result["run"] = finished.to_json()
    if as_json:
        emit_json(result)
    else:
        echo(f"{'enqueued' if created else 'already enqueued'}: {key}")
        if finished is not None:
            echo(describe(rt, finished))
    if finished is not None and finished.status not in (RunStatus.SUCCEEDED, RunStatus.PARTIAL):
        sys.exit(EXIT_ERROR)


def _run_filters(command: Callable[..., None]) -> Callable[..., None]:
    """The options `runs` and `runs list` share."""
    for option in (
        json_option,
        click.option("--schedule", default="", help="Only runs fired by this schedule."),
        click.option("--agent", default="", help="Only runs of this agent."),
        click.option("--limit", default=20, show_default=True, type=click.IntRange(0, MAX_ROWS)),
    ):
        command = option(command)
    return command


@main_group.group("runs", invoke_without_command=True)
@_run_filters
@click.pass_context
def list_runs(
    click_ctx: click.Context, limit: int, agent: str, schedule: str, as_json: bool
) -> None:
    """Recent runs, newest first (also `runs list`; `runs tree RUN_KEY` for one run's
    subagents)."""
    if click_ctx.invoked_subcommand is not None:
        return
    obj = click_ctx.find_object(Context)
    assert obj is not None, "the root group sets the context"
    _print_runs(obj, limit, agent, schedule, as_json)


@list_runs.command("list")
@_run_filters
@pass_context
def runs_list(obj: Context, limit: int, agent: str, schedule: str, as_json: bool) -> None:
    """Recent runs, newest first."""
    _print_runs(obj, limit, agent, schedule, as_json)


def _print_runs(obj: Context, limit: int, agent: str, schedule: str, as_json: bool) -> None:
    rt = connect(obj)
    with rt.engine.connect() as conn:
        found = runs.recent(conn, limit=limit, agent=agent, schedule=schedule)
    if as_json:
        emit_json([r.to_json() for r in found])
        return
    emit_table(
        ["key", "agent", "status", "loaded", "wrote", "took", "summary"],
        [
            [
                r.key,
                r.agent,
                r.status.value,
                len(r.loaded_ids),
                r.candidates,
                f"{r.duration.total_seconds():.2f}s" if r.duration else "-",
                _shortened(r.summary or r.error),
            ]
            for r in found
        ],
        empty="no runs yet",
    )


def _shortened(text: str, width: int = 60) -> str:
    """One line of at most `width` characters; a cut ends in an ellipsis."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"


@list_runs.command("tree")
@click.argument("run_key")
@click.option("--depth", default=5, show_default=True, help="How many subagent levels to show.")
@json_option
@pass_context
def runs_tree(obj: Context, run_key: str, depth: int, as_json: bool) -> None:
    """RUN_KEY and the subagent runs it started, as a tree."""
    rt = connect(obj)
    with rt.engine.connect() as conn:
        root = subagents.tree(conn, run_key, depth=depth)
    if root is None:
        raise InvalidInput(f"no run {run_key!r} (see `nightshift runs` for keys)")
    if as_json:
        emit_json(_node_json(root))
        return
    for line in _node_lines(root, ""):
        echo(line)


def _node_json(node: subagents.TreeNode) -> dict[str, Any]:
    return {**node.run.to_json(), "children": [_node_json(c) for c in node.children]}


def _node_lines(node: subagents.TreeNode, indent: str) -> list[str]:
    run = node.run
    label = f"{run.subagent} · " if run.subagent else ""
    detail = _shortened(run.summary or run.error)
    lines = [f"{indent}{label}{run.key} [{run.agent}] {run.status.value}  {detail}".rstrip()]
    for child in node.children:
        lines += _node_lines(child, indent + "  ")
    return lines


def _read_payload(path: Path | None, limit: int) -> dict[str, Any]:
    if path is None:
        return {}
    # Never more than the limit and one byte: `--payload /dev/zero` or a 10 GB file
    # is refused as too large, not read whole into memory (or forever).
    with click.open_file(str(path), "rb") as stream:
        raw = stream.read(limit + 1)
    if len(raw) > limit:
        raise InvalidInput(
            f"payload {path} is larger than {limit} bytes "
            "(NIGHTSHIFT_MAX_PAYLOAD_BYTES); send a reference instead"
        )
    too_deep = InvalidInput(f"payload {path} nests deeper than {MAX_PAYLOAD_DEPTH} levels")
    try:
        payload = json.loads(raw, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InvalidInput(f"payload {path} is not valid JSON: {error}") from None
    except _AmbiguousJSON as error:
        raise InvalidInput(f"payload {path} {error}; nothing was enqueued") from None
    except RecursionError:  # the decoder recurses: this is far deeper than the limit
        raise too_deep from None
    if nesting_depth(payload, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH:
        raise too_deep
    if not isinstance(payload, dict):
        raise InvalidInput(f"payload {path} must be a JSON object, not {type(payload).__name__}")
    return payload


class _AmbiguousJSON(ValueError):
    """JSON that Python's decoder accepts but that means different things to different
    readers: a key given twice (which value wins?) and NaN/Infinity (not JSON at all)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            raise _AmbiguousJSON(f"has the key {key!r} twice in one object")
        seen.add(key)
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise _AmbiguousJSON(f"holds {name}, which JSON has no form for")


def _wait_for(rt: Runtime, key: str, timeout: float = 600.0) -> Run:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with rt.engine.connect() as conn:
            run = runs.get(conn, key)
        if run is not None and run.status in FINISHED:
            return run
        time.sleep(0.25)
    raise ShownError(f"run {key} did not finish within {timeout:.0f}s")
