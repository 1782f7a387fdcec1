"""Flower as nightshift runs it: authentication on, bounded, persistent.

`nightshift flower` starts Flower through `main()` here, which closes one gap in
Flower itself: its `/metrics` endpoint answers without authentication even when
basic auth is on. We wrap that handler with Tornado's `authenticated` before
Flower starts, so a scrape needs the same credentials as the UI.
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path

from workers.settings import Settings

CREDENTIALS_FILE = "flower-credentials"


def credentials(settings: Settings) -> tuple[str, bool]:
    """`user:password` for basic auth and whether it was generated just now.

    With NIGHTSHIFT_FLOWER_BASIC_AUTH unset, a random password is made once and
    kept (mode 0600) in the data dir, so Flower is never open by accident.
    """
    if settings.flower_basic_auth:
        return settings.flower_basic_auth, False
    path = Path(settings.data_dir) / CREDENTIALS_FILE
    if path.exists():
        return path.read_text().strip(), False
    path.parent.mkdir(parents=True, exist_ok=True)
    value = f"admin:{secrets.token_urlsafe(18)}"
    path.touch(mode=0o600)
    path.write_text(value + "\n")
    return value, True


def options(settings: Settings) -> dict[str, object]:
    """Flower's options; `ops/flowerconfig.py` exposes the same to `celery flower --conf`."""
    return {
        "port": settings.flower_port,
        "basic_auth": [credentials(settings)[0]],
        "max_tasks": settings.flower_max_tasks,
        "persistent": True,
        "db": str(Path(settings.data_dir) / "flower-state"),
        "state_save_interval": 10_000,  # ms; without it state is saved only on clean exit
        "purge_offline_workers": 3600,
        "tasks_columns": "name,uuid,state,args,received,started,runtime,worker",
        **({"broker_api": settings.flower_broker_api} if settings.flower_broker_api else {}),
    }


SECRET_OPTIONS = ("basic_auth", "broker_api")
"""Options never put on the command line, which any user of the machine can read
(`ps`, /proc/PID/cmdline): `main` hands them to Flower through its environment."""


def command_line(settings: Settings, address: str = "127.0.0.1") -> list[str]:
    args = [f"--address={address}"]
    for name, value in options(settings).items():
        if name in SECRET_OPTIONS:
            continue
        values = value if isinstance(value, list) else [value]
        args += [f"--{name}={v}" for v in values]
    return args


def main() -> None:
    import os

    import tornado.web
    from celery.bin.celery import main as celery_main
    from flower.views import monitor

    monitor.Metrics.get = tornado.web.authenticated(monitor.Metrics.get)
    # Flower reads FLOWER_<OPTION> from its environment; set here, after the process
    # started, it is not even in /proc/PID/environ.
    for name, value in options(Settings.from_env()).items():
        if name in SECRET_OPTIONS:
            values = value if isinstance(value, list) else [value]
            os.environ[f"FLOWER_{name.upper()}"] = ",".join(map(str, values))
    sys.argv = ["celery", "-A", "workers.app", "flower", *sys.argv[1:]]
    celery_main()


if __name__ == "__main__":
    main()
