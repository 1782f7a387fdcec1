"""`nightshift memory edit` and `memory review …`: the operator's direct changes.

An edit names the version it read (optimistic concurrency): a stale edit exits 5
and shows both versions; `--force` overrides and is audited as `edit.forced`.
"""

from __future__ import annotations

import os

import click

from memory.port import EditConflict, EditRefused, MemoryNotFound, NotPending
from memory.records import Scope
from memory.store import MAX_ROWS
from workers.cli.base import (
    Context,
    F,
    InvalidInput,
    ShownError,
    connect,
    echo,
    emit_json,
    json_option,
    pass_context,
)
from workers.cli.memory_cmds import emit_memories, memory, scope_options

EXIT_CONFLICT = 5


class EditConflictExit(ShownError):
    """A stale edit: the memory changed since the version named; exit code 5."""

    exit_code = EXIT_CONFLICT


def actor_option(fn: F) -> F:
    return click.option(
        "--actor",
        default=lambda: os.environ.get("USER") or "operator",
        envvar="NIGHTSHIFT_ACTOR",
        show_envvar=True,
        help="Who is acting, for the audit trail.  [default: $USER]",
    )(fn)


@memory.command("edit")
@scope_options
@click.argument("memory_id")
@click.option(
    "--version", "version", type=click.IntRange(1), required=True, help="The version you read."
)
@click.option("--content", required=True)
@click.option("--reason", default="", help="Why, for the audit trail.")
@click.option("--force", is_flag=True, help="Overwrite even if it changed since (audited).")
@actor_option
@json_option
@pass_context
def edit(
    obj: Context,
    tenant: str,
    user: str,
    agent: str,
    memory_id: str,
    version: int,
    content: str,
    reason: str,
    force: bool,
    actor: str,
    as_json: bool,
) -> None:
    """Replace MEMORY_ID's content if it is still at --version (optimistic concurrency)."""
    store = connect(obj).store
    scope = Scope(tenant, user, agent)
    try:
        result = store.edit(
            scope,
            memory_id,
            version=version,
            content=content,
            actor=actor,
            reason=reason,
            force=force,
        )
    except EditConflict as conflict:
        if as_json:
            emit_json(
                {
                    "conflict": True,
                    "expected_version": conflict.expected,
                    "current": conflict.current.to_json(),
                    "proposed": {"version": conflict.expected, "content": conflict.proposed},
                }
            )
        else:
            echo(f"stored (version {conflict.current.version}): {conflict.current.content}")
            echo(f"yours  (based on {conflict.expected}): {conflict.proposed}")
        raise EditConflictExit(str(conflict)) from None
    except (EditRefused, MemoryNotFound) as error:
        raise InvalidInput(str(error)) from None
    if as_json:
        emit_json(
            {
                "forced": result.forced,
                "before": result.before.to_json(),
                "current": result.current.to_json(),
            }
        )
        return
    forced = " (forced)" if result.forced else ""
    echo(f"edited {result.current.id} to version {result.current.version}{forced}")


@memory.group("review")
def review() -> None:
    """The review queue: memories waiting for a person or the operator."""


@review.command("list")
@scope_options
@click.option(
    "--all",
    "whole_tenant",
    is_flag=True,
    help="Every scope of the tenant (the operator's whole queue), not only what the scope reads.",
)
@click.option("--limit", default=200, show_default=True, type=click.IntRange(0, MAX_ROWS))
@json_option
@pass_context
def review_list(
    obj: Context,
    tenant: str,
    user: str,
    agent: str,
    whole_tenant: bool,
    limit: int,
    as_json: bool,
) -> None:
    """Memories readable by the scope that wait for review (--all: the whole tenant's).

    Approve or reject one with the scope it lives in (its SCOPE column)."""
    scope = Scope(tenant, user, agent)
    found = connect(obj).store.pending_review(scope, limit=limit, whole_tenant=whole_tenant)
    where = f"any scope of {tenant}" if whole_tenant else f"what {scope} reads (--all: the tenant)"
    emit_memories(found, as_json, f"nothing waits for review in {where}")


def _decide(
    obj: Context,
    scope: Scope,
    memory_id: str,
    approve: bool,
    actor: str,
    reason: str,
    as_json: bool,
) -> None:
    store = connect(obj).store
    try:
        decided = store.review(scope, memory_id, approve=approve, actor=actor, reason=reason)
    except (EditRefused, MemoryNotFound, NotPending) as error:
        raise InvalidInput(str(error)) from None
    if as_json:
        emit_json(decided.to_json())
        return
    echo(f"{decided.id} is now {decided.status.value}")


@review.command("approve")
@scope_options
@click.argument("memory_id")
@click.option("--reason", default="")
@actor_option
@json_option
@pass_context
def review_approve(
    obj: Context,
    tenant: str,
    user: str,
    agent: str,
    memory_id: str,
    reason: str,
    actor: str,
    as_json: bool,
) -> None:
    """Make MEMORY_ID active (superseding its key's current value)."""
    _decide(obj, Scope(tenant, user, agent), memory_id, True, actor, reason, as_json)


@review.command("reject")
@scope_options
@click.argument("memory_id")
@click.option("--reason", default="")
@actor_option
@json_option
@pass_context
def review_reject(
    obj: Context,
    tenant: str,
    user: str,
    agent: str,
    memory_id: str,
    reason: str,
    actor: str,
    as_json: bool,
) -> None:
    """Reject MEMORY_ID: it is kept, audited, and never loaded."""
    _decide(obj, Scope(tenant, user, agent), memory_id, False, actor, reason, as_json)
