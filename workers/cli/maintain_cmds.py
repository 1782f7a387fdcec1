"""`nightshift maintain …` and `nightshift memory forget|vote`: maintenance on demand.

    nightshift maintain consolidate --tenant acme --dry-run   # print the plan
    nightshift maintain expire --ttl "default=90;episode=30"
    nightshift memory forget --tenant acme --subject ana --as person:ana --reason "asked"
    nightshift memory vote 3f2a… down --tenant acme

Long jobs draw a progress bar (one step per tenant) on a terminal; every command
prints a summary, or JSON with `--json`.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from datetime import timedelta
from typing import Any

import click
from sqlalchemy import insert, select

from memory.expiry import TtlConfig, TtlConfigError
from memory.forgetting import ForgetRefused, ForgetReport, Requester, Role, Selector, forget
from memory.port import EditRefused
from memory.records import Scope
from memory.reinforcement import Direction, Vote
from memory.tables import audit, memories
from workers.cli.base import (
    Context,
    InvalidInput,
    ShownError,
    connect,
    echo,
    emit_json,
    json_option,
    main_group,
    not_empty,
    pass_context,
)
from workers.cli.memory_cmds import memory
from workers.maintenance import (
    FORGET_PLACES,
    JOBS,
    JobSummary,
    apply_vote_batch,
    run_job,
    tenants,
    utcnow,
)
from workers.settings import MAX_PURGE_AFTER_DAYS


@main_group.group()
def maintain() -> None:
    """Keep memory true over time: consolidate, expire, decay, purge."""


def _job_command(job: str) -> None:
    @maintain.command(job, help=_HELP[job])
    @click.option(
        "--tenant",
        envvar="NIGHTSHIFT_TENANT",
        show_envvar=True,
        callback=not_empty,
        help="Only this tenant.",
    )
    @click.option("--dry-run", is_flag=True, help="Count (or plan) without changing anything.")
    @click.option(
        "--ttl",
        envvar="NIGHTSHIFT_MEMORY_TTL",
        show_envvar=True,
        default="",
        help="TTL days per kind/layer, e.g. 'default=90;episode=30' (each 7–180).",
    )
    @click.option(
        "--purge-after",
        envvar="NIGHTSHIFT_PURGE_AFTER_DAYS",
        show_envvar=True,
        type=click.IntRange(min=0, max=MAX_PURGE_AFTER_DAYS),
        default=None,
        help="Days after expiry before a row is deleted for good.  [default: 30]",
    )
    @json_option
    @pass_context
    def command(
        obj: Context,
        tenant: str | None,
        dry_run: bool,
        ttl: str,
        purge_after: int | None,
        as_json: bool,
    ) -> None:
        rt = connect(obj)
        try:
            ttl_config = TtlConfig.parse(ttl or obj.settings.memory_ttl)
        except TtlConfigError as error:
            raise InvalidInput(f"--ttl / NIGHTSHIFT_MEMORY_TTL: {error}") from None
        days = obj.settings.purge_after_days if purge_after is None else purge_after
        kwargs: dict[str, Any] = {
            "now": utcnow(),
            "ttl": ttl_config,
            "purge_after": timedelta(days=days),
            "dry_run": dry_run,
            "tenant": tenant,
        }
        names = tenants(rt.engine, tenant) if job == "consolidate" else []
        if sys.stderr.isatty() and not as_json and names:
            with click.progressbar(length=len(names), label=job, file=sys.stderr) as bar:
                summary = run_job(rt.engine, job, progress=lambda _: bar.update(1), **kwargs)
        else:
            summary = run_job(rt.engine, job, **kwargs)
        if as_json:
            emit_json(summary.to_json())
        else:
            _print_summary(summary)


_HELP = {
    "consolidate": "Merge duplicates, supersede replaced facts, compact old episodes, rebuild hot memory.",
    "expire": "Mark memories past valid_to or unreinforced past their TTL as expired.",
    "decay": "Write back decayed scores of memories that fell under the load bar.",
    "purge": "Delete expired memories for good after --purge-after days (with tombstones).",
}
for _job in JOBS:
    _job_command(_job)


def _print_summary(summary: JobSummary) -> None:
    mode = " (dry run: nothing changed)" if summary.dry_run else ""
    echo(f"{summary.job} · {summary.tenants} tenants · {summary.seconds:.2f}s{mode}")
    counts = " · ".join(f"{k} {v}" for k, v in sorted(summary.counts.items())) or "nothing to do"
    echo(f"  {counts}")
    if summary.job == "consolidate" and summary.dry_run:
        for tenant, result in summary.per_tenant.items():
            plan = result.get("plan", {"merges": [], "compactions": []})
            for merge in plan["merges"][:50]:
                echo(
                    f"  {tenant}: merge {merge['source_id']} into {merge['target_id']}"
                    f" ({merge['rule']})"
                )
            for compaction in plan["compactions"][:50]:
                echo(
                    f"  {tenant}: compact {len(compaction['sources'])} episodes of"
                    f" {compaction['scope']} into one summary"
                )


# -- memory forget / vote ----------------------------------------------------------


def _requester(text: str) -> Requester:
    role, _, name = text.partition(":")
    if role == "operator":
        return Requester.operator(name or os.environ.get("USER") or "operator")
    if role in (Role.PERSON.value, Role.AGENT.value) and name:
        return Requester(Role(role), name)
    raise InvalidInput(f"--as {text!r}: use operator, person:NAME or agent:NAME")


def _selector(tenant: str, options: dict[str, Any]) -> Selector:
    given = {k: v for k, v in options.items() if v}
    if len(given) != 1:
        raise InvalidInput(
            "say what to forget with exactly one of --subject, --scope, --run, --source, --id, --text"
        )
    [(name, value)] = given.items()
    try:
        if name == "scope":
            return Selector.by_scope(Scope.parse(value))
        if name == "ids":
            return Selector.by_ids(tenant, value)
        return getattr(Selector, f"by_{name}")(tenant, value)
    except ValueError as error:
        raise InvalidInput(f"--{name}: {error}") from None


@memory.command("forget")
@click.option(
    "--tenant", required=True, envvar="NIGHTSHIFT_TENANT", show_envvar=True, callback=not_empty
)
@click.option(
    "--subject",
    help="Everything about this person, however the name is spelled (case, spaces, Unicode"
    " form, look-alike letters of other scripts).",
)
@click.option(
    "--scope",
    "scope",
    help="Everything in tenant/user/agent (use * for any), written as `memory show` writes it:"
    " a / * @ % inside a name is %2F %2A %40 %25.",
)
@click.option("--run", help="Everything a run wrote.")
@click.option(
    "--source", help="Everything from a source: stated, operator, observed, inferred, subagent."
)
@click.option("--id", "ids", multiple=True, help="These memories (repeatable).")
@click.option(
    "--text",
    help="Every memory whose content contains this text, in any case, spacing or Unicode form"
    " (look-alike letters of other scripts too).",
)
@click.option(
    "--as",
    "requester",
    default="operator",
    envvar="NIGHTSHIFT_FORGET_AS",
    show_envvar=True,
    help="Who asks: operator, person:NAME (only what is about NAME) or agent:NAME (always refused).",
)
@click.option("--reason", default="", help="Why (kept in the tombstone; never put the text here).")
@click.option(
    "--limit",
    default=10_000,
    show_default=True,
    type=click.IntRange(1),
    help="Rows per pass; more → partial.",
)
@json_option
@pass_context
def forget_cmd(
    obj: Context,
    tenant: str,
    subject: str | None,
    scope: str | None,
    run: str | None,
    source: str | None,
    ids: tuple[str, ...],
    text: str | None,
    requester: str,
    reason: str,
    limit: int,
    as_json: bool,
) -> None:
    """Forget memories for good, and print the proof (scanned = skipped + deleted + failed)."""
    who = _requester(requester)
    selector = _selector(
        tenant,
        {
            "subject": subject,
            "scope": scope,
            "run": run,
            "source": source,
            "ids": ids,
            "text": text,
        },
    )
    rt = connect(obj)
    try:
        report = forget(
            rt.engine,
            selector,
            who,
            now=utcnow(),
            reason=reason,
            limit=limit,
            places=FORGET_PLACES,
        )
    except ForgetRefused as error:
        raise ShownError(str(error)) from None
    except EditRefused as error:  # a secret in --reason: the tombstone would keep it
        raise InvalidInput(str(error)) from None
    if as_json:
        emit_json(report.to_json())
        return
    _print_report(report)


def _print_report(report: ForgetReport) -> None:
    echo(
        f"forgot {report.deleted} memories · scanned {report.scanned} = skipped {report.skipped}"
        f" + deleted {report.deleted} + failed {report.failed} · remaining {report.remaining}"
    )
    rebuilt = ", ".join(f"{k} {v}" for k, v in report.rebuilt.items() if v)
    if rebuilt:
        echo(f"  rebuilt without it: {rebuilt}")
    relisted = ", ".join(f"{place} {count}" for place, count in report.places.items())
    echo(f"  re-listed, still holding it: {relisted or 'nothing to list'}")
    if report.exhaustive:
        echo(f"  exhaustive · tombstone {report.tombstone_id}")
    else:
        echo(f"  PARTIAL: {report.reason} · tombstone {report.tombstone_id}")
    for note in report.notes:
        echo(f"  note: {note}")


@memory.command("vote")
@click.argument("memory_id")
@click.argument("direction", type=click.Choice([d.value for d in Direction]))
@click.option(
    "--tenant",
    required=True,
    envvar="NIGHTSHIFT_TENANT",
    show_envvar=True,
    callback=not_empty,
    help="The tenant the memory belongs to; the operator votes within it only.",
)
@click.option(
    "--voter",
    default=lambda: f"operator:{os.environ.get('USER') or 'operator'}",
    envvar="NIGHTSHIFT_VOTER",
    show_envvar=True,
    help="Who votes, for the audit trail.",
)
@json_option
@pass_context
def vote_cmd(
    obj: Context, memory_id: str, direction: str, tenant: str, voter: str, as_json: bool
) -> None:
    """Reinforce (up) or weaken (down) a memory of TENANT you checked, as the operator.

    Any memory of the tenant, the person's statements included: the operator's vote
    is the operator's word. A run's votes reach only what the run was given.
    """
    rt = connect(obj)
    with rt.engine.connect() as conn:
        row = conn.execute(
            select(memories.c.score, memories.c.status).where(
                memories.c.id == memory_id, memories.c.tenant == tenant
            )
        ).first()
    if row is None:
        raise InvalidInput(
            f"no memory {memory_id!r} in tenant {tenant!r}: see `nightshift memory show`"
        )
    now = utcnow()
    report = apply_vote_batch(
        rt.engine,
        f"vote:cli:{uuid.uuid4()}",
        [Vote(memory_id, Direction(direction), voter)],
        now,
        operator_for=tenant,
    )
    with rt.engine.begin() as conn:
        conn.execute(
            insert(audit).values(
                at=now,
                actor=voter,
                action=f"vote.{direction}",
                memory_id=memory_id,
                tenant=tenant,
                detail=json.dumps({"applied": report.applied}),
            )
        )
        score = conn.execute(
            select(memories.c.score).where(memories.c.id == memory_id)
        ).scalar_one()
    if as_json:
        emit_json(
            {"memory_id": memory_id, "direction": direction, "score": score, **report.to_json()}
        )
        return
    if not report.applied:
        echo(f"memory {memory_id} is {row.status}, not active: vote not applied")
        return
    echo(f"voted {direction} on {memory_id}: score {row.score:.2f} → {score:.2f}")
