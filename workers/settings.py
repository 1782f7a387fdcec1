"""nightshift's settings: one typed object, read once from `NIGHTSHIFT_*` variables.

With nothing set, everything is embedded under `./.nightshift/`: a SQLite store,
Celery's `filesystem://` broker (which supports broadcast, so `celery inspect`
and Flower work) and a file result backend. Point `NIGHTSHIFT_DATABASE_URL` at
PostgreSQL and `NIGHTSHIFT_BROKER_URL` at Redis or RabbitMQ and the same code runs
on them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory.expiry import TtlConfig, TtlConfigError

PREFIX = "NIGHTSHIFT_"
# A century: past it `now - purge_after` leaves the calendar (an OverflowError traceback
# at the first purge); nobody keeps expired memories that long on purpose.
MAX_PURGE_AFTER_DAYS = 36500
AMQP_SCHEMES = ("amqp://", "amqps://", "pyamqp://", "librabbitmq://")


class SettingsError(ValueError):
    """A NIGHTSHIFT_* variable holds a value that cannot be used."""


@dataclass(frozen=True, slots=True)
class Settings:
    data_dir: Path = Path(".nightshift")
    database_url: str = ""
    broker_url: str = ""
    result_backend: str = ""
    schedules_path: str = ""
    sandbox_root: str = ""
    agents: Mapping[str, str] = field(default_factory=dict)
    lease_seconds: int = 60
    reaper_interval: float = 15.0
    requeue_after: int = 300
    run_max_attempts: int = 5  # a run whose worker stopped this many times is failed, not re-sent
    # A write batch that came back this many times unfinished (its writer stopped each
    # time) is refused with the rule writer-crashed, not applied again.
    write_max_attempts: int = 3
    run_time_limit: int = 600
    load_limit: int = 20
    load_max_chars: int = 8000
    max_payload_bytes: int = 65536
    agent_rules: str = ""  # a .toml/.json file of agent memory attachments (memory.attachment)
    beat_reload_seconds: float = 2.0
    beat_lease_seconds: float = 10.0  # a standby takes over within this (+1 s) of a leader's death
    flower_port: int = 5555
    sandbox_max_bytes: int = 64 * 1024 * 1024  # a run's sandbox may not grow past this
    sandbox_sweep_age: float = 10.0  # seconds before an unleased sandbox may be swept
    command_env: str = ""  # extra NAME=value;… passed to command agents (nothing else is)
    llm_base_url: str = ""  # an OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1
    llm_api_key: str = ""
    llm_max_steps: int = 8  # tool-calling rounds per run
    llm_max_tokens: int = 20000  # total tokens (prompt + completion) per run
    flower_basic_auth: str = ""  # user:password; empty: generated on first start
    flower_max_tasks: int = 10000
    # RabbitMQ's management API for Flower's Broker page (queue lengths), with credentials;
    # empty: Flower's guess, http://<broker user:password@host>:15672/api/<vhost>
    flower_broker_api: str = ""
    metrics_port: int = 9808
    writer_shards: int = 1
    # Redis redelivers an unacknowledged message after this; runs are protected by their
    # lease, so it can be short, and a killed writer's batch comes back within it and a
    # fifth (`workers.app.redis_transport_options`).
    broker_visibility_timeout: int = 300
    memory_ttl: str = ""  # TTL days per kind/layer, e.g. "default=90;episode=30" (each 7–180)
    purge_after_days: int = 30  # expired memories are deleted for good this long after expiry
    run_retention_days: int = 90  # finished runs enqueued longer ago are deleted; 0: keep all
    consolidate_interval: float = 3600.0  # seconds between maintenance passes on beat
    expire_interval: float = 900.0
    decay_interval: float = 3600.0
    purge_interval: float = 86400.0

    def __post_init__(self) -> None:
        data = self.data_dir.resolve()
        defaults = {
            "data_dir": data,
            "database_url": self.database_url or f"sqlite:///{data / 'nightshift.db'}",
            "broker_url": self.broker_url or "filesystem://",
            "result_backend": self.result_backend or f"file://{data / 'results'}",
            "sandbox_root": self.sandbox_root or str(data / "sandboxes"),
        }
        for name, value in defaults.items():
            object.__setattr__(self, name, value)
        for name in (
            "lease_seconds",
            "run_time_limit",
            "load_limit",
            "load_max_chars",
            "max_payload_bytes",
            "writer_shards",
            "run_max_attempts",
            "write_max_attempts",
        ):
            if getattr(self, name) <= 0:
                raise SettingsError(f"{PREFIX}{name.upper()} must be positive")
        if self.result_backend.startswith(AMQP_SCHEMES):
            # Celery 5 removed its `amqp` result backend: it failed in every worker at start
            # with "Unknown result backend: 'amqp'" (a traceback from inside Celery).
            raise SettingsError(
                f"{PREFIX}RESULT_BACKEND={_scheme(self.result_backend)}…: Celery has no AMQP"
                " result backend; leave it unset (files in the data dir) or use"
                " db+postgresql+psycopg2://… (nightshift reads no task result back: runs, receipts"
                " and the audit trail are in the database)"
            )
        if not 0 <= self.purge_after_days <= MAX_PURGE_AFTER_DAYS:
            raise SettingsError(
                f"{PREFIX}PURGE_AFTER_DAYS={self.purge_after_days}: allowed is"
                f" 0–{MAX_PURGE_AFTER_DAYS} days"
            )
        self.ttl()  # a malformed TTL fails here, when settings are read, not at first use

    def ttl(self) -> TtlConfig:
        """`memory_ttl` parsed: the TTLs loads, searches and the expire job all use.

        Raises SettingsError naming NIGHTSHIFT_MEMORY_TTL when it is malformed.
        """
        try:
            return TtlConfig.parse(self.memory_ttl)
        except TtlConfigError as error:
            raise SettingsError(f"{PREFIX}MEMORY_TTL={self.memory_ttl!r}: {error}") from None

    @property
    def embedded_broker(self) -> bool:
        return self.broker_url.startswith("filesystem://")

    @property
    def amqp_broker(self) -> bool:
        """RabbitMQ (or another AMQP 0-9-1 broker) through Celery's `amqp://` transports."""
        return self.broker_url.startswith(AMQP_SCHEMES)

    @property
    def broker_folder(self) -> Path:
        return self.data_dir / "broker"

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Read every `NIGHTSHIFT_<FIELD>` once; `overrides` (CLI flags) win."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = env.get(PREFIX + f.name.upper())
            if raw is None or raw == "":
                continue
            values[f.name] = _convert(f.name, f.type, raw)
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def to_env(self) -> dict[str, str]:
        """These settings as variables, for child processes started by `nightshift up`."""
        out: dict[str, str] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "agents":
                value = ";".join(f"{k}={v}" for k, v in value.items())
            out[PREFIX + f.name.upper()] = str(value)
        return out


def _scheme(url: str) -> str:
    """`amqp://` of `amqp://user:secret@host//`: what an error may show of a URL."""
    return url.partition("://")[0] + "://"


def _convert(name: str, kind: Any, raw: str) -> Any:
    kind = str(kind)
    try:
        if name == "agents":
            return _parse_agents(raw)
        if "Path" in kind:
            return Path(raw)
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
    except ValueError as error:
        raise SettingsError(f"{PREFIX}{name.upper()}={raw!r}: {error}") from None
    return raw


def _parse_agents(raw: str) -> dict[str, str]:
    """`name=package.module:callable;other=…` — the agents this deployment may run."""
    agents: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in raw.split(";"))):
        name, sep, target = item.partition("=")
        if not sep or ":" not in target:
            raise ValueError(f"agent entry {item!r} is not name=module:callable")
        agents[name.strip()] = target.strip()
    return agents
