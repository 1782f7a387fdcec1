"""The Celery app: three queues, late acks for runs, task events on for Flower.

`celery -A workers.app worker …` finds `app` here. It is built on first access
from the environment (PEP 562 module `__getattr__`), never at import, so tests
and the CLI can build their own with `create_app(settings)`.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from celery import Celery
from kombu import Exchange, Queue

from workers import embedded_broker, log_redaction
from workers.settings import Settings
from workers.sharding import write_queues

embedded_broker.register()  # `filesystem://` with an atomic put, in every process
log_redaction.connect()  # no secret in any Celery process's log

RUNS_QUEUE = "runs"
MAINTENANCE_QUEUE = "maintenance"

RUN_TASK = "nightshift.run"
WRITE_TASK = "nightshift.write"
REAP_TASK = "nightshift.reap"


REDIS_SCHEMES = ("redis://", "rediss://", "redis+socket://", "sentinel://")
UNACKED_MUTEX_EXPIRE = 10
"""Seconds a Redis consumer's restore sweep may hold kombu's `unacked_mutex`."""


def redis_transport_options(visibility_timeout: int) -> dict[str, int]:
    """kombu's Redis options that make a dead consumer's messages come back within
    about `visibility_timeout` + `visibility_timeout / 5` (at most + 10 s).

    kombu gives an unacknowledged message back only in a live consumer's sweep
    (`QoS.restore_visible`), and by default sweeps every 10 s but scans Redis on
    every 10th sweep only (`unacked_restore_throttle`): about every 100 s whatever
    the visibility timeout. A writer SIGKILLed holding a batch, with a 5 s timeout,
    had its batch applied some 90 s later. Scanning on every sweep, at a fifth of
    the timeout, costs a lock and a ZRANGE per consumer process per sweep.

    A sweep holds `unacked_mutex` for milliseconds, but a consumer killed inside one
    leaves it held until it expires (300 s by default), blocking every other
    consumer's sweeps: 10 s bounds that. A sweep that outlives the lock is harmless:
    each message is moved back in a transaction that watches the unacked hash, so two
    sweeps cannot restore it twice.
    """
    return {
        "visibility_timeout": visibility_timeout,
        "unacked_restore_interval": max(1, min(10, visibility_timeout // 5)),
        "unacked_restore_throttle": 1,
        "unacked_mutex_expire": UNACKED_MUTEX_EXPIRE,
    }


def create_app(settings: Settings) -> Celery:
    app = Celery(
        "nightshift",
        broker=settings.broker_url,
        backend=settings.result_backend,
        include=["workers.tasks", "workers.maintenance", "workers.serving"],
    )
    app.conf.update(
        task_queues=[
            Queue(name, Exchange(name), routing_key=name)
            for name in (RUNS_QUEUE, *write_queues(settings.writer_shards), MAINTENANCE_QUEUE)
        ],
        task_default_queue=RUNS_QUEUE,
        task_routes={
            RUN_TASK: {"queue": RUNS_QUEUE, "routing_key": RUNS_QUEUE},
            REAP_TASK: {"queue": MAINTENANCE_QUEUE, "routing_key": MAINTENANCE_QUEUE},
            "nightshift.maintain.*": {"queue": MAINTENANCE_QUEUE, "routing_key": MAINTENANCE_QUEUE},
        },
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # On the folder broker (Redis and RabbitMQ notice at once), billiard waits this
        # long for a result a dead pool process may have sent before it fails the task
        # with WorkerLostError and the message is requeued: a writer's crash held the
        # queue behind it for the default 10 s. The main process reads results as they
        # come; one later than this only brings a finished task's message back, which
        # its receipt (a write) or the run's claim turns away.
        worker_lost_wait=2.0,
        worker_prefetch_multiplier=1,
        # No STARTED state in the result backend: the run row says whether a run started
        # (and Flower has task-started events); it cost a read and a write per run.
        task_track_started=False,
        task_send_sent_event=True,
        worker_send_task_events=True,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        result_expires=timedelta(days=1),
        broker_connection_retry_on_startup=True,
        worker_hijack_root_logger=False,
        beat_scheduler="workers.beat:Scheduler",
        beat_max_loop_interval=settings.beat_reload_seconds,
        beat_schedule={
            "nightshift-reap": {
                "task": REAP_TASK,
                "schedule": timedelta(seconds=settings.reaper_interval),
                "options": {"queue": MAINTENANCE_QUEUE, "expires": settings.reaper_interval * 2},
            },
            **{  # workers/maintenance.py: one pass over every tenant, a tenant at a time
                f"nightshift-maintain-{job}": {
                    "task": f"nightshift.maintain.{job}",
                    "schedule": timedelta(seconds=seconds),
                    "options": {"queue": MAINTENANCE_QUEUE, "expires": seconds},
                }
                for job, seconds in (
                    ("consolidate", settings.consolidate_interval),
                    ("expire", settings.expire_interval),
                    ("decay", settings.decay_interval),
                    ("purge", settings.purge_interval),
                )
            },
        },
        timezone="UTC",
        enable_utc=True,
    )
    if settings.broker_url.startswith(REDIS_SCHEMES):
        app.conf.broker_transport_options = redis_transport_options(
            settings.broker_visibility_timeout
        )
    elif settings.broker_url.startswith("sqs://"):
        app.conf.broker_transport_options = {
            "visibility_timeout": settings.broker_visibility_timeout
        }
    if settings.amqp_broker:
        # RabbitMQ closes the channel of a consumer that holds a message unacknowledged
        # past its `consumer_timeout` (30 min by default): a run longer than that. Celery
        # treats a closed channel as unrecoverable unless told otherwise, and the whole
        # worker exited. Reconnecting instead, the broker redelivers the run, and the
        # copy finds it claimed under a live lease and does nothing.
        app.conf.broker_channel_error_retry = True
    if settings.embedded_broker:
        folder = settings.broker_folder
        for sub in ("queue", "control", "processed", "unacked"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        app.conf.broker_transport_options = {
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "control_folder": str(folder / "control"),
            "processed_folder": str(folder / "processed"),
            # Taken, not yet acknowledged: back to the queue if its consumer dies.
            "unacked_folder": str(folder / "unacked"),
            # The folder is polled; 0.2 s keeps runs snappy at negligible cost on a laptop.
            "polling_interval": 0.2,
        }
    if settings.result_backend.startswith("file://"):
        # The default backend with any broker: Celery refuses a folder that is not there.
        Path(settings.result_backend.removeprefix("file://")).mkdir(parents=True, exist_ok=True)
    app.nightshift_settings = settings
    return app


_default: Celery | None = None


def __getattr__(name: str) -> Any:
    global _default
    if name == "app":
        if _default is None:
            _default = create_app(Settings.from_env())
        return _default
    raise AttributeError(name)
