"""`nightshift status` (for people and container health checks) and `nightshift metrics`."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime

import click

from workers.app import create_app
from workers.cli.base import Context, echo, emit_json, json_option, main_group, pass_context
from workers.runtime import Runtime


@main_group.command()
@click.option(
    "--max-write-lag",
    default=300.0,
    show_default=True,
    help="Seconds a finished run's write may wait before status is unhealthy.",
)
@json_option
@pass_context
def status(obj: Context, max_write_lag: float, as_json: bool) -> None:
    """Broker, database, workers, writer and pending writes; exit 1 when unhealthy."""
    from workers import health

    settings = obj.settings
    rt = Runtime(settings)
    found = health.report(
        rt, create_app(settings), lambda: datetime.now(UTC), max_write_lag=max_write_lag
    )
    if as_json:
        emit_json(found.to_json())
    else:
        for check in found.checks:
            echo(f"{'ok ' if check.ok else 'BAD'}  {check.name:<15} {check.detail}")
        for name, value in found.facts.items():
            echo(f"     {name.replace('_', ' '):<15} {value}")
        echo("healthy" if found.healthy else "unhealthy")
    sys.exit(0 if found.healthy else 1)


@main_group.command()
@click.option(
    "--port",
    default=None,
    type=int,
    envvar="NIGHTSHIFT_METRICS_PORT",
    show_envvar=True,
    help="Port for /metrics.  [default: 9808]",
)
@click.option(
    "--address",
    default="127.0.0.1",
    show_default=True,
    envvar="NIGHTSHIFT_METRICS_ADDRESS",
    show_envvar=True,
)
@pass_context
def metrics(obj: Context, port: int | None, address: str) -> None:
    """Serve Prometheus metrics computed from the database at each scrape."""
    from prometheus_client import REGISTRY, start_http_server

    from workers.metrics import NightshiftCollector

    settings = obj.settings
    REGISTRY.register(NightshiftCollector(Runtime(settings), create_app(settings)))
    start_http_server(port or settings.metrics_port, addr=address)
    echo(f"metrics on http://{address}:{port or settings.metrics_port}/metrics")
    while True:
        time.sleep(3600)
