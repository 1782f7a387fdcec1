"""`nightshift up`, `db`, and the process commands (`worker`, `writer`, `beat`, `flower`)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import click
import kombu

from schedules import catalog
from schedules.files import load_path
from workers import schema
from workers.cli.base import (
    Context,
    InvalidInput,
    Unavailable,
    broker_refused,
    connect,
    echo,
    main_group,
    pass_context,
    reaching_database,
    refusal,
)
from workers.cli.supervisor import Supervisor, celery_command, flower_command
from workers.cli.watch import watch_runs
from workers.flower import CREDENTIALS_FILE, credentials
from workers.runtime import Runtime
from workers.settings import Settings

DEMO_SCHEDULES = Path(__file__).resolve().parent.parent / "demo" / "schedules.toml"


@main_group.group()
def db() -> None:
    """The database schema."""


@db.command("upgrade")
@pass_context
def db_upgrade(obj: Context) -> None:
    """Migrate the database to the newest schema (safe to run repeatedly)."""
    with reaching_database(obj.settings):
        rt = Runtime(obj.settings)
        schema.upgrade(rt.engine)
        revisions = schema.current_revisions(rt.engine)
    echo(f"database at revision {', '.join(sorted(revisions))}")


@main_group.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--concurrency",
    "-c",
    default=2,
    show_default=True,
    envvar="NIGHTSHIFT_RUN_CONCURRENCY",
    show_envvar=True,
    help="Run worker processes.",
)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
@pass_context
def worker(obj: Context, concurrency: int, celery_args: tuple[str, ...]) -> None:
    """Run worker: consumes the `runs` and `maintenance` queues. Extra args go to celery."""
    _exec(obj.settings, celery_command("worker", concurrency) + list(celery_args))


@main_group.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--shard",
    type=int,
    default=None,
    envvar="NIGHTSHIFT_WRITER_SHARD",
    show_envvar=True,
    help="Consume memory.write.SHARD (when NIGHTSHIFT_WRITER_SHARDS > 1).",
)
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
@pass_context
def writer(obj: Context, shard: int | None, celery_args: tuple[str, ...]) -> None:
    """Memory writer: the single consumer of its write queue (one per shard)."""
    shards = obj.settings.writer_shards
    if shards > 1 and (shard is None or not 0 <= shard < shards):
        raise InvalidInput(
            f"NIGHTSHIFT_WRITER_SHARDS is {shards}: start one writer per shard "
            f"with --shard 0 … --shard {shards - 1}"
        )
    if shards == 1 and shard not in (None, 0):
        raise InvalidInput("--shard needs NIGHTSHIFT_WRITER_SHARDS > 1")
    _exec(
        obj.settings,
        celery_command("writer", shard=shard if shards > 1 else None) + list(celery_args),
    )


@main_group.command(context_settings={"ignore_unknown_options": True})
@click.argument("celery_args", nargs=-1, type=click.UNPROCESSED)
@pass_context
def beat(obj: Context, celery_args: tuple[str, ...]) -> None:
    """Beat: fires schedules from the database."""
    _exec(obj.settings, celery_command("beat") + list(celery_args))


@main_group.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--address",
    default="127.0.0.1",
    show_default=True,
    envvar="NIGHTSHIFT_FLOWER_ADDRESS",
    show_envvar=True,
    help="Interface to listen on.",
)
@click.argument("flower_args", nargs=-1, type=click.UNPROCESSED)
@pass_context
def flower(obj: Context, address: str, flower_args: tuple[str, ...]) -> None:
    """Flower, the Celery monitor, with basic auth (NIGHTSHIFT_FLOWER_BASIC_AUTH)."""
    _announce_flower(obj.settings)
    _exec(obj.settings, flower_command(obj.settings, address) + list(flower_args))


def _announce_flower(settings: Settings) -> None:
    value, generated = credentials(settings)
    user = value.partition(":")[0]
    where = (
        f"password in {settings.data_dir / CREDENTIALS_FILE}"
        if not settings.flower_basic_auth
        else "password from NIGHTSHIFT_FLOWER_BASIC_AUTH"
    )
    echo(
        f"flower: http://127.0.0.1:{settings.flower_port} · user {user!r}, {where}"
        + (" (generated now)" if generated else "")
    )


@main_group.command()
@click.option(
    "--schedules",
    "schedules_path",
    envvar="NIGHTSHIFT_SCHEDULES_PATH",
    show_envvar=True,
    type=click.Path(path_type=Path),
    help="Schedule files to add or update at start (never deleting others)."
    "  [default: the bundled demo, on a database that has no schedules yet]",
)
@click.option(
    "--flower/--no-flower",
    "with_flower",
    default=False,
    envvar="NIGHTSHIFT_UP_FLOWER",
    show_envvar=True,
    help="Also start Flower.",
)
@click.option(
    "--runs",
    "stop_after",
    type=int,
    default=None,
    envvar="NIGHTSHIFT_UP_RUNS",
    show_envvar=True,
    help="Stop after this many runs have finished (for demos and tests).",
)
@pass_context
def up(
    obj: Context, schedules_path: Path | None, with_flower: bool, stop_after: int | None
) -> None:
    """Start everything on this machine: run worker, memory writer, beat (and Flower).

    Prints one line per finished run; Ctrl-C stops every child cleanly.
    """
    from workers.cli.schedule_cmds import apply_path

    settings = obj.settings
    rt = connect(obj, create=True)
    _broker_accepts(settings)
    path = schedules_path or DEMO_SCHEDULES
    echo(
        f"nightshift: store {settings.database_url.split('://')[0]}, "
        f"broker {settings.broker_url.split('://')[0]}, data in {settings.data_dir}"
    )
    # `up` adds, it never prunes: pointed at a deployment's database (a variable left
    # exported from another shell), pruning to the demo deleted every schedule.
    if schedules_path is None and (others := _schedules_besides_the_demo(rt)):
        echo(f"this database has {others} schedules of its own: the demo is not added")
    else:
        apply_path(rt, path, dry_run=False, prune=False, as_json=False)
    supervisor = Supervisor(settings, log_dir=settings.data_dir / "logs")
    # `kill`, systemd and `docker stop` send SIGTERM (a closed terminal, SIGHUP): stop
    # the children as Ctrl-C does. Their own sessions keep them from these signals,
    # so without this they would outlive `up`, and beat would go on firing.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _interrupt)
    code = 0
    try:
        supervisor.start("worker", celery_command("worker", 2))
        if settings.writer_shards == 1:
            supervisor.start("writer", celery_command("writer"))
        for shard in range(settings.writer_shards if settings.writer_shards > 1 else 0):
            supervisor.start(f"writer-{shard}", celery_command("writer", shard=shard))
        supervisor.start("beat", celery_command("beat"))
        if with_flower:
            _announce_flower(settings)
            supervisor.start("flower", flower_command(settings))
        echo(f"logs in {supervisor.log_dir}; Ctrl-C to stop\n")
        code = watch_runs(rt, supervisor, stop_after=stop_after)
    except KeyboardInterrupt:
        echo("\nstopping… (each worker first finishes the run it holds: a few seconds)")
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)  # a second signal must not cut the stop short
        supervisor.stop_all()
    sys.exit(code)


def _schedules_besides_the_demo(rt: Runtime) -> int:
    """How many applied schedules are not the demo's: the demo joins only a database
    that holds nothing else (a laptop's store, not a deployment's)."""
    demo = {s.name for s in load_path(DEMO_SCHEDULES).schedules}
    with rt.engine.connect() as conn:
        return sum(s.name not in demo for s in catalog.all_schedules(conn))


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _exec(settings: Settings, argv: list[str]) -> None:
    _broker_accepts(settings)
    env = {**os.environ, **settings.to_env()}
    os.execvpe(argv[0], argv, env)


def _broker_accepts(settings: Settings) -> None:
    """Refuse to start against a broker that refuses nightshift (RabbitMQ: a wrong
    password, a vhost that is not there; Redis: a wrong password, a database index
    past its `databases`): retrying will not change its answer, and Celery would
    retry it forever, the process up and doing nothing (`up` saw only a child exit
    with code 1). A broker that does not answer yet is left to Celery's retries."""
    if settings.broker_url.startswith("filesystem"):
        return  # the embedded broker: a folder, nothing to refuse
    try:
        with kombu.Connection(settings.broker_url, connect_timeout=5) as conn:
            conn.ensure_connection(max_retries=1)
    except Exception as error:
        if (said := refusal(error)) is not None:
            raise Unavailable(broker_refused(said)) from None
        return  # not answering: Celery retries, as it should while it comes up
