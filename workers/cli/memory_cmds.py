"""`nightshift memory …`: write through the gate, read what the store holds, edit, review.

Every command takes `--json`. Reads are confined to the scope given with
`--tenant/--user/--agent` and the layers above it; `load --origin` shows what a
run of that agent would be given from a trigger of that origin.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

import click

from memory.attachment import AttachmentError, from_path
from memory.forgetting import compact_fulltext
from memory.receipts import Outcome
from memory.records import ANY, Candidate, Kind, Memory, Provenance, Scope, Source
from memory.store import MAX_LOADED, MAX_ROWS, LoadBounds
from memory.transfer import (
    ImportFormatError,
    ImportRefused,
    export_tenant,
    import_tenant,
    refresh_statistics,
)
from workers import runs
from workers.cli.base import (
    EXIT_INVALID_INPUT,
    TRIGGER_ORIGINS,
    Context,
    F,
    InvalidInput,
    Unavailable,
    connect,
    echo,
    emit_json,
    emit_table,
    json_option,
    main_group,
    not_empty,
    pass_context,
    refuse_odd_scope,
    storable_scope_part,
)
from workers.hooks.write_back import stored_handle
from workers.maintenance import utcnow
from workers.writer import OPERATOR_HANDLE_PREFIX

CLI_SOURCES = [Source.OPERATOR.value, Source.STATED.value, Source.OBSERVED.value]


@main_group.group()
def memory() -> None:
    """Write, read, edit and review memory."""


def scope_options(fn: F) -> F:
    fn = click.option(
        "--agent",
        default=ANY,
        envvar="NIGHTSHIFT_AGENT",
        show_envvar=True,
        callback=storable_scope_part("agent"),
        help="Agent (empty: the shared/tenant layers).",
    )(fn)
    fn = click.option(
        "--user",
        default=ANY,
        envvar="NIGHTSHIFT_USER",
        show_envvar=True,
        callback=storable_scope_part("user"),
        help="User (empty: the agent/tenant layers).",
    )(fn)
    return tenant_option(fn)


def tenant_option(fn: F) -> F:
    return click.option(
        "--tenant",
        required=True,
        envvar="NIGHTSHIFT_TENANT",
        show_envvar=True,
        callback=storable_scope_part("tenant", empty_ok=False),
    )(fn)


def memory_rows(found: Sequence[Memory]) -> list[list[Any]]:
    return [
        [
            m.id,
            str(m.scope),
            m.kind.value,
            m.key or "-",
            m.status.value,
            m.source.value,
            m.version,
            m.content[:60],
        ]
        for m in found
    ]


HEADERS = ["id", "scope", "kind", "key", "status", "source", "v", "content"]


def emit_memories(found: Sequence[Memory], as_json: bool, empty: str) -> None:
    if as_json:
        emit_json([m.to_json() for m in found])
    else:
        emit_table(HEADERS, memory_rows(found), empty=empty)


@memory.command("show")
@scope_options
@click.option("--all", "all_statuses", is_flag=True, help="Include superseded and pending rows.")
@click.option("--limit", default=200, show_default=True, type=click.IntRange(0, MAX_ROWS))
@json_option
@pass_context
def show(
    obj: Context, tenant: str, user: str, agent: str, all_statuses: bool, limit: int, as_json: bool
) -> None:
    """Memories readable by the scope TENANT/USER/AGENT (its layer and those above)."""
    scope = Scope(tenant, user, agent)
    found = connect(obj).store.show(scope, all_statuses=all_statuses, limit=limit)
    emit_memories(found, as_json, f"no memories readable by {scope}")


@memory.command("load")
@scope_options
@click.option("--goal", default="", help="The run's goal, ranked against.")
@click.option("--trigger", default="", help="Trigger text, ranked against.")
@click.option(
    "--origin",
    type=click.Choice(TRIGGER_ORIGINS),
    default=None,
    help="Trigger origin: apply the agent's rules as a run from it would.",
)
@click.option("--limit", default=20, show_default=True, type=click.IntRange(0, MAX_LOADED))
@click.option("--max-chars", default=8000, show_default=True, type=click.IntRange(0))
@json_option
@pass_context
def load(
    obj: Context,
    tenant: str,
    user: str,
    agent: str,
    goal: str,
    trigger: str,
    origin: str | None,
    limit: int,
    max_chars: int,
    as_json: bool,
) -> None:
    """What a run of TENANT/USER/AGENT would be given: hot first, then ranked, bounded."""
    rt = connect(obj)
    rules = _rules(obj)(agent) if origin is not None else None
    result = rt.store.load(
        Scope(tenant, user, agent),
        goal=goal,
        trigger=trigger,
        bounds=LoadBounds(limit=limit, max_chars=max_chars),
        rules=rules,
        origin=origin,
    )
    if as_json:
        emit_json(
            {
                "hot": [m.to_json() for m in result.hot],
                "ranked": [m.to_json() for m in result.ranked],
                "ids": result.ids,
            }
        )
        return
    emit_memories([*result.hot, *result.ranked], False, "nothing would be loaded")


@memory.command("search")
@scope_options
@click.argument("query")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(0, MAX_ROWS))
@json_option
@pass_context
def search(
    obj: Context, tenant: str, user: str, agent: str, query: str, limit: int, as_json: bool
) -> None:
    """Full-text search of the memories readable by the scope."""
    hits = connect(obj).store.search(Scope(tenant, user, agent), query, limit=limit)
    if as_json:
        emit_json([{**m.to_json(), "relevance": rel} for m, rel in hits])
        return
    emit_memories([m for m, _ in hits], False, f"nothing matches {query!r}")


@memory.command("history")
@scope_options
@click.argument("key", callback=not_empty)
@json_option
@pass_context
def history(obj: Context, tenant: str, user: str, agent: str, key: str, as_json: bool) -> None:
    """Every version of KEY, oldest first, with what superseded what."""
    found = connect(obj).store.history(Scope(tenant, user, agent), key)
    if as_json:
        emit_json([m.to_json() for m in found])
        return
    emit_table(
        ["id", "scope", "status", "source", "valid_from", "valid_to", "superseded_by", "content"],
        [
            [
                m.id,
                str(m.scope),
                m.status.value,
                m.source.value,
                f"{m.valid_from:%Y-%m-%d %H:%M}",
                f"{m.valid_to:%Y-%m-%d %H:%M}" if m.valid_to else "-",
                m.superseded_by_id or "-",
                m.content[:50],
            ]
            for m in found
        ],
        empty=f"no memory has key {key!r} in the layers readable by {Scope(tenant, user, agent)}",
    )


@memory.command("export")
@scope_options
@click.option(
    "--whole-tenant",
    is_flag=True,
    help="Everything the tenant owns (every scope, history, review items, receipts, "
    "audit) in the format `nightshift memory import` reads: backups, moving databases.",
)
@json_option
@pass_context
def export(
    obj: Context, tenant: str, user: str, agent: str, whole_tenant: bool, as_json: bool
) -> None:
    """Every memory of exactly one scope (no layers above), as JSON lines."""
    rt = connect(obj)
    if whole_tenant:
        with rt.engine.connect() as conn:
            for line in export_tenant(conn, tenant):
                click.echo(line)  # JSON in ASCII: nothing a terminal obeys, and data as is
        return
    for m in rt.store.export(Scope(tenant, user, agent)):
        click.echo(json.dumps(m.to_json(), default=str))


@memory.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@json_option
@pass_context
def import_(obj: Context, path: str, as_json: bool) -> None:
    """Import a `memory export --whole-tenant` file; rows already present are kept as they are.

    What the file's tombstones say was forgotten is forgotten here too, should this
    database hold it (an older export imported before this one)."""
    rt = connect(obj, create=True)
    try:
        with click.open_file(path) as lines, rt.engine.begin() as conn:
            report = import_tenant(conn, lines, now=utcnow())
    except (ImportFormatError, ImportRefused) as error:
        raise InvalidInput(f"{path}: {error}; nothing was imported") from None
    if report.forgotten_again:
        compact_fulltext(rt.engine)  # the deleted text leaves the full-text structures too
    refresh_statistics(rt.engine, report)
    if as_json:
        emit_json(report.to_json())
        return
    for table, count in sorted(report.read.items()):
        echo(f"{table}: read {count}, inserted {report.inserted.get(table, 0)}")
    if report.forgotten_again:
        echo(
            f"forgot again {report.forgotten_again} memories this database held that the"
            " file's tombstones say were forgotten"
        )
    echo(f"tenant {report.tenant!r} imported")


@memory.command("receipt")
@click.argument("handle")
@json_option
@pass_context
def receipt(obj: Context, handle: str, as_json: bool) -> None:
    """The writer's decisions for a write HANDLE (a run's is `write:<run key>`)."""
    found = connect(obj).store.receipt(stored_handle(handle))
    if found is None:
        raise InvalidInput(
            f"no receipt {handle!r} yet: the writer has not applied it (or the handle is wrong)"
        )
    if as_json:
        emit_json(found.to_json())
        return
    _print_receipt(found)


def _print_receipt(found: Any) -> None:
    echo(
        f"receipt {found.handle} · run {found.run_id or '-'} · {found.created_at:%Y-%m-%d %H:%M:%S}"
    )
    emit_table(
        ["#", "outcome", "kind", "memory", "rule", "reason"],
        [
            [d.index, d.outcome.value, d.kind, d.memory_id or "-", d.rule, d.reason]
            for d in found.decisions
        ],
        empty="(no candidates)",
    )


@memory.command("audit")
@tenant_option
@click.option("--memory", "memory_id", default="", help="Only the entries of this memory id.")
@click.option(
    "--limit",
    default=200,
    show_default=True,
    type=click.IntRange(0, MAX_ROWS),
    help="Show the last LIMIT entries.",
)
@click.option("--first", is_flag=True, help="Show the first LIMIT entries instead.")
@json_option
@pass_context
def audit(
    obj: Context, tenant: str, memory_id: str, limit: int, first: bool, as_json: bool
) -> None:
    """The tenant's audit trail (a memory's, with --memory), oldest first: who changed
    what, when, and why. The last 200 entries unless told otherwise."""
    found = connect(obj).store.audit(tenant, memory_id, limit=limit, newest=not first)
    if as_json:
        emit_json([e.to_json() for e in found])
        return
    emit_table(
        ["at", "actor", "action", "memory", "detail"],
        [
            [
                f"{e.at:%Y-%m-%d %H:%M:%S}",
                e.actor,
                e.action,
                e.memory_id or "-",
                _audit_detail(e.detail),
            ]
            for e in found
        ],
        empty=f"no audit entries for {memory_id or 'tenant ' + repr(tenant)}",
    )


def _audit_detail(detail: dict[str, Any]) -> str:
    """The detail's set fields as `name=value`, in the detail's order."""
    shown = [f"{k}={v}" for k, v in detail.items() if v not in (None, "", [], {})]
    return " ".join(shown)


@memory.command("write")
@scope_options
@click.option("--content", required=True, help="The memory's text ('-' reads it from stdin).")
@click.option("--kind", type=click.Choice([k.value for k in Kind]), default=Kind.FACT.value)
@click.option("--key", default="", help="Slot for supersession, e.g. customer.renewal_date.")
@click.option("--source", type=click.Choice(CLI_SOURCES), default=Source.OPERATOR.value)
@click.option("--reference", default="", help="Evidence: message id, URL, file:line.")
@click.option("--subject", default="", help="The person the memory is about.")
@click.option("--idempotency-key", default="", help="Default: a fresh key per invocation.")
@click.option("--wait", is_flag=True, help="Wait for the writer and print the receipt.")
@click.option("--timeout", default=30.0, show_default=True, help="Seconds --wait waits.")
@json_option
@pass_context
def write(
    obj: Context,
    tenant: str,
    user: str,
    agent: str,
    content: str,
    kind: str,
    key: str,
    source: str,
    reference: str,
    subject: str,
    idempotency_key: str,
    wait: bool,
    timeout: float,
    as_json: bool,
) -> None:
    """Submit one candidate to the memory writer; it passes the same gate as a run's."""
    from workers.app import WRITE_TASK, create_app
    from workers.enqueue import task_id
    from workers.sharding import write_queue

    refuse_odd_scope(tenant=tenant, user=user, agent=agent)
    if source == Source.STATED.value and not user:
        raise click.UsageError(
            "--source stated needs --user: a statement is a person's own word"
            " (for the agent or tenant layers, write as the operator)"
        )
    if content == "-":
        content = sys.stdin.read().rstrip("\r\n")

    handle = f"{OPERATOR_HANDLE_PREFIX}{uuid.uuid4().hex}"
    candidate = Candidate(
        scope=Scope(tenant, user, agent),
        kind=Kind(kind),
        content=content,
        key=key,
        idempotency_key=idempotency_key or handle,
        provenance=Provenance(
            Source(source), reference=reference, task_id=handle, agent=agent, subject=subject
        ),
    )
    app = create_app(obj.settings)
    app.send_task(
        WRITE_TASK,
        args=[handle, "", [candidate.to_json()]],
        task_id=task_id(handle),
        queue=write_queue(tenant, obj.settings.writer_shards),
        argsrepr=f"(handle={handle!r}, candidates=1)",
    )
    if not wait:
        emit_json({"handle": handle}) if as_json else echo(handle)
        return
    rt = connect(obj, create=True)
    deadline = time.monotonic() + timeout
    while (found := rt.store.receipt(handle)) is None:
        if time.monotonic() > deadline:
            raise Unavailable(
                f"no receipt for {handle} after {timeout:g}s: is a memory writer running"
                " on this database? (poll later with"
                f" `nightshift memory receipt {handle}`)"
            )
        time.sleep(0.2)
    emit_json(found.to_json()) if as_json else _print_receipt(found)
    if any(d.outcome is Outcome.REFUSED for d in found.decisions):
        # The gate's answer is printed above; scripts see it in the exit code too.
        sys.exit(EXIT_INVALID_INPUT)


@memory.command("why")
@click.argument("run_id")
@json_option
@pass_context
def why(obj: Context, run_id: str, as_json: bool) -> None:
    """What run RUN_ID was given (the memory ids it recorded) and what it wrote."""
    rt = connect(obj)
    with rt.engine.connect() as conn:
        run = runs.get(conn, run_id)
    if run is None:
        raise InvalidInput(f"no run {run_id!r}: see `nightshift runs list`")
    scope = Scope(run.tenant, run.user, run.agent)
    by_id = {m.id: m for m in rt.store.get(scope, run.loaded_ids)}
    given = [by_id[i] for i in run.loaded_ids if i in by_id]
    written = rt.store.receipt(run.write_handle) if run.write_handle else None
    if as_json:
        emit_json(
            {
                "run": run.key,
                "scope": str(scope),
                "loaded_ids": run.loaded_ids,
                "loaded": [m.to_json() for m in given],
                "missing": [i for i in run.loaded_ids if i not in by_id],
                "receipt": written.to_json() if written else None,
                "attempt": {
                    "outcome": run.status.value,
                    "tried": run.tried,
                    "evidence": run.evidence,
                },
            }
        )
        return
    echo(f"run {run.key} · {scope} · {run.status.value}")
    if run.tried or run.evidence:
        echo(
            f"attempt: tried {run.tried or '(nothing said)'}"
            + (f"; evidence {run.evidence}" if run.evidence else "")
        )
    echo(f"given {len(run.loaded_ids)} memories:")
    emit_memories(given, False, "  (none)")
    if written is None:
        echo("wrote nothing" if not run.write_handle else "write not applied yet")
    else:
        _print_receipt(written)


def _rules(obj: Context) -> Any:
    try:
        return from_path(obj.settings.agent_rules)
    except AttachmentError as error:
        raise InvalidInput(str(error)) from None
