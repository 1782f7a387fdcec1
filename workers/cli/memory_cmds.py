"""`nightshift memory …`: read what the store holds, and poll write receipts."""

from __future__ import annotations

import click

from memory.records import ANY, Scope
from workers.cli.base import (
    Context,
    F,
    InvalidInput,
    connect,
    emit_json,
    emit_table,
    json_option,
    main_group,
    pass_context,
)


@main_group.group()
def memory() -> None:
    """Inspect memory."""


def scope_options(fn: F) -> F:
    fn = click.option("--agent", default=ANY, help="Agent (empty: the shared/tenant layers).")(fn)
    fn = click.option("--user", default=ANY, help="User (empty: the agent/tenant layers).")(fn)
    return click.option("--tenant", required=True)(fn)


@memory.command("show")
@scope_options
@click.option("--all", "all_statuses", is_flag=True, help="Include superseded and pending rows.")
@click.option("--limit", default=200, show_default=True)
@json_option
@pass_context
def show(
    obj: Context, tenant: str, user: str, agent: str, all_statuses: bool, limit: int, as_json: bool
) -> None:
    """Memories readable by the scope TENANT/USER/AGENT (its layer and those above)."""
    rt = connect(obj)
    found = rt.store.show(Scope(tenant, user, agent), all_statuses=all_statuses, limit=limit)
    if as_json:
        emit_json([m.to_json() for m in found])
        return
    emit_table(
        ["id", "scope", "kind", "key", "status", "source", "content"],
        [
            [
                m.id[:8],
                str(m.scope),
                m.kind.value,
                m.key or "-",
                m.status.value,
                m.source.value,
                m.content[:70],
            ]
            for m in found
        ],
        empty=f"no memories readable by {Scope(tenant, user, agent)}",
    )


@memory.command("receipt")
@click.argument("handle")
@json_option
@pass_context
def receipt(obj: Context, handle: str, as_json: bool) -> None:
    """The writer's decisions for a write HANDLE (a run's is `write:<run key>`)."""
    rt = connect(obj)
    found = rt.store.receipt(handle)
    if found is None:
        raise InvalidInput(
            f"no receipt {handle!r} yet: the writer has not applied it (or the handle is wrong)"
        )
    if as_json:
        emit_json(found.to_json())
        return
    click.echo(
        f"receipt {found.handle} · run {found.run_id} · {found.created_at:%Y-%m-%d %H:%M:%S}"
    )
    emit_table(
        ["#", "outcome", "kind", "memory", "rule", "reason"],
        [
            [d.index, d.outcome.value, d.kind, (d.memory_id or "-")[:8], d.rule, d.reason]
            for d in found.decisions
        ],
        empty="(no candidates)",
    )
