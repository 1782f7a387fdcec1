"""`nightshift trigger` and `nightshift runs`."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from memory.records import Scope
from memory.secrets import find_secrets_as_read
from memory.storable import scope_problems, unstorable
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
from workers.runs import (
    FINISHED,
    PayloadNotJSONError,
    PayloadTooDeepError,
    Run,
    RunRequest,
    RunStatus,
    trigger_key,
)
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
@click.option(
    "--event-id",
    default=None,
    help="Dedup key: the same event id makes one run.  [default: none, a manual run]",
)
@click.option(
    "--origin",
    type=click.Choice(TRIGGER_ORIGINS),
    default="api",
    help="Where the trigger came from; user memory is loaded only for private ones.",
)
@click.option(
    "--wait",
    is_flag=True,
    help="Wait for the run to finish and print it (for an event id that ran before, that"
    " run); exit 1 unless it succeeded (or ended partial: done, some output refused).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=600.0,
    show_default=True,
    envvar="NIGHTSHIFT_WAIT_TIMEOUT",
    show_envvar=True,
    help="With --wait: seconds to wait before giving up (exit 1; the run goes on).",
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
    event_id: str | None,
    origin: str,
    wait: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Enqueue an event-triggered run of AGENT now."""
    settings = obj.settings
    _check_options(settings.agents, agent, tenant, user, goal, event_id)
    event_id = event_id or ""
    payload = _read_payload(payload_file, settings.max_payload_bytes)
    rt = connect(obj, create=True)
    key = trigger_key(agent, tenant, user, event_id)
    try:
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
    except (PayloadTooDeepError, PayloadNotJSONError) as error:
        raise InvalidInput(str(error)) from None
    created = enqueue(create_app(settings), [request], datetime.now(UTC))
    result: dict[str, Any] = {
        "run_key": key,
        "enqueued": bool(created),
        "note": "" if created else "this event id was enqueued before; no new run",
    }
    if not as_json:  # first, so a person waiting knows which run they wait for
        echo(f"{'enqueued' if created else 'already enqueued'}: {key}")
    if not wait:
        if as_json:
            emit_json(result)
        return
    # An event id that ran before: its run is the answer (waited for if unfinished).
    finished = _wait_for(rt, key, timeout)
    if as_json:
        emit_json({**result, "run": finished.to_json()})
    else:
        echo(describe(rt, finished))
    if finished.status not in (RunStatus.SUCCEEDED, RunStatus.PARTIAL):
        sys.exit(EXIT_ERROR)


def _check_options(
    agents: Mapping[str, str], agent: str, tenant: str, user: str, goal: str, event_id: str | None
) -> None:
    """Refuse, before anything is made, options no run can be made of: an unknown
    agent, a blank event id, text no store keeps, a secret that would become the key."""
    if event_id is not None and not event_id.strip():
        # An unset variable in a script: it made a manual run, never deduplicated.
        raise InvalidInput("--event-id is empty: give the event's id, or leave the option out")
    try:
        resolve(agent, agents)
    except UnknownAgentError as error:
        raise InvalidInput(str(error)) from None
    # A scope holding a secret is refused here too (`scope_problems`): the payload and
    # goal are redacted, but tenant, user and event id make the run key, which is kept
    # whole (the run record, the broker, Flower, the logs, the results).
    if problems := scope_problems(Scope(tenant, user, agent)):
        raise InvalidInput(f"{'; '.join(problems)}; nothing was enqueued")
    if found := find_secrets_as_read(event_id or ""):
        kinds = ", ".join(sorted({f.kind for f in found}))
        raise InvalidInput(
            f"--event-id holds a secret ({kinds}); it would be kept in the run key, the"
            " broker and the logs: name the event by an id, not a credential;"
            " nothing was enqueued"
        )
    for option, value in (("--event-id", event_id or ""), ("--goal", goal)):
        if what := unstorable(value):
            raise InvalidInput(f"{option} holds {what}, which no store keeps; nothing was enqueued")


def _run_filters(command: Callable[..., None]) -> Callable[..., None]:
    """The options `runs` and `runs list` share."""
    for option in (
        json_option,
        click.option("--schedule", default="", help="Only runs fired by this schedule."),
        click.option("--agent", default="", help="Only runs of this agent."),
        click.option(
            "--status",
            default="",
            type=click.Choice(["", *(s.value for s in RunStatus)]),
            help="Only runs in this state.",
        ),
        click.option("--limit", default=20, show_default=True, type=click.IntRange(0, MAX_ROWS)),
    ):
        command = option(command)
    return command


@main_group.group("runs", invoke_without_command=True)
@_run_filters
@click.pass_context
def list_runs(
    click_ctx: click.Context, limit: int, status: str, agent: str, schedule: str, as_json: bool
) -> None:
    """Recent runs, newest first (also `runs list`; `runs tree RUN_KEY` for one run's
    subagents)."""
    if click_ctx.invoked_subcommand is not None:
        return
    obj = click_ctx.find_object(Context)
    assert obj is not None, "the root group sets the context"
    _print_runs(obj, limit, status, agent, schedule, as_json)


@list_runs.command("list")
@_run_filters
@pass_context
def runs_list(
    obj: Context, limit: int, status: str, agent: str, schedule: str, as_json: bool
) -> None:
    """Recent runs, newest first."""
    _print_runs(obj, limit, status, agent, schedule, as_json)


def _print_runs(
    obj: Context, limit: int, status: str, agent: str, schedule: str, as_json: bool
) -> None:
    rt = connect(obj)
    with rt.engine.connect() as conn:
        found = runs.recent(conn, limit=limit, status=status, agent=agent, schedule=schedule)
    if as_json:
        emit_json([r.to_json() for r in found])
        return
    now = datetime.now(UTC)
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
                _lapsed(r, now) or _shortened(r.summary or r.error),
            ]
            for r in found
        ],
        empty="no runs yet",
    )


def _lapsed(run: runs.Run, now: datetime) -> str:
    """For a `running` run whose worker stopped renewing its lease: say so, or the
    table shows a dead worker's run as running, as if nothing were wrong."""
    if (ago := run.lease_lapsed(now)) is None:
        return ""
    return f"no worker: its lease lapsed {ago.total_seconds():.0f}s ago; the reaper sends it again"


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
        payload = json.loads(
            raw,
            object_pairs_hook=_unique_keys,
            parse_constant=_no_constant,
            parse_float=_finite_float,
            parse_int=_int,
        )
    except _AmbiguousJSON as error:
        raise InvalidInput(f"payload {path} {error}; nothing was enqueued") from None
    except ValueError as error:  # not JSON, not UTF-8
        raise InvalidInput(f"payload {path} is not valid JSON: {error}") from None
    except RecursionError:  # the decoder recurses: this is far deeper than the limit
        raise too_deep from None
    if nesting_depth(payload, MAX_PAYLOAD_DEPTH) > MAX_PAYLOAD_DEPTH:
        raise too_deep
    if not isinstance(payload, dict):
        raise InvalidInput(f"payload {path} must be a JSON object, not {type(payload).__name__}")
    if found := _unstorable_in(payload, ""):
        raise InvalidInput(
            f"payload {path} holds {found}, which no store keeps; nothing was enqueued"
        )
    return payload


def _unstorable_in(value: Any, at: str) -> str:
    """Where in the decoded JSON `value` (found at the path `at`) a key or a text holds
    what no store keeps, a NUL or a lone surrogate (`memory.storable.unstorable`), and
    which: "a NUL character in the value at a.b[2]"; "" when there is none. The run
    would take it to the agent, and its summary or memories back to the store."""
    if isinstance(value, str):
        what = unstorable(value)
        return f"{what} in the value at {at or 'the top'}" if what else ""
    items: Iterable[tuple[str, Any]] = ()
    if isinstance(value, dict):
        for key in value:
            if what := unstorable(key):
                return f"{what} in a key of the object at {at or 'the top'}"
        items = ((f"{at}.{key}" if at else key, item) for key, item in value.items())
    elif isinstance(value, list):
        items = ((f"{at}[{index}]", item) for index, item in enumerate(value))
    return next((found for here, item in items if (found := _unstorable_in(item, here))), "")


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


def _finite_float(text: str) -> float:
    """A JSON number with a fraction or exponent as Python reads it; one past a float's
    range (`1e999`), which Python reads as Infinity, is refused like `Infinity`."""
    number = float(text)
    if not math.isfinite(number):
        raise _AmbiguousJSON(f"holds the number {text[:40]}, past a float's range (Infinity)")
    return number


def _int(text: str) -> int:
    """A JSON integer; one of more digits than Python converts (4,300) is refused by name."""
    try:
        return int(text)
    except ValueError:
        raise _AmbiguousJSON(f"holds an integer of {len(text)} digits, too long to read") from None


def _wait_for(rt: Runtime, key: str, timeout: float) -> Run:
    """Run `key` once it has finished, looked at every quarter second; after `timeout`
    seconds (0: look once), an error saying it has not."""
    deadline = time.monotonic() + timeout
    while True:
        with rt.engine.connect() as conn:
            run = runs.get(conn, key)
        if run is not None and run.status in FINISHED:
            return run
        left = deadline - time.monotonic()
        if left <= 0:
            status = run.status.value if run is not None else "gone"
            raise ShownError(
                f"run {key} did not finish within {timeout:g}s (it is {status}; it goes on:"
                " see `nightshift runs`)"
            )
        time.sleep(min(0.25, left))
