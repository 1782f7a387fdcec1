"""Run overhead: nightshift runs against a bare no-op Celery task, on the same Redis broker.

    .venv/bin/python -m bench.runs_bench                 # ~1-2 min on a quiet 2-core box
    .venv/bin/python -m bench.runs_bench --runs 100 --concurrency 2 --repeat 1

In one process tree, against the same Redis (`--redis-url`, default
NIGHTSHIFT_TEST_REDIS_URL or redis://127.0.0.1:6379/13, flushed) and a fresh
PostgreSQL database (`--postgres-url`), all of these workers are up at once:

1. peer: a Celery worker (same options as ours: acks_late, prefetch 1, json,
   prefork `--concurrency`, task events on including task-sent, INFO logging)
   running a task that does nothing;
2. nightshift run worker + memory writer, running runs of a Python agent that
   does nothing, and of a `command` agent (`/bin/true` through the command
   adapter: sandbox, Landlock, clean environment, outbox).

Each of `--repeat` rounds times one batch of each in turn (peer, no-op, command),
so a busy neighbour on a shared machine slows all three in the same round; the
headline is the median over rounds of (our rate / the peer's rate in that round).
Rate = tasks (runs) / wall time from the first message sent to the last result,
after a warm-up batch. Run rows are created before the clock starts (as enqueue
does before sending). The per-run breakdown is each hook's time inside the
worker (`Outcome.timings`, returned by the run task): sandbox, goal (the scope's
latest attempts), load (memory load), projection, write-back submit, record
(finishing the run row with its attempt), median and p99 over all runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import redis
from celery import Celery
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.pool import NullPool

from workers import runs, schema
from workers.agents import AgentResult, RunContext
from workers.app import create_app
from workers.cli.supervisor import celery_command
from workers.enqueue import send, task_id
from workers.runs import RunRequest
from workers.runtime import Runtime
from workers.settings import Settings

NOOP_TASK = "bench.noop"
BREAKDOWN = ("sandbox", "load", "goal", "projection", "write_back", "record", "agent")


def noop_agent(ctx: RunContext) -> AgentResult:
    return AgentResult()


def peer_app(broker: str) -> Celery:
    """The peer: a bare Celery app with one no-op task, configured like ours."""
    app = Celery("bench_peer", broker=broker, backend=broker)
    app.conf.update(
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_serializer="json",
        result_serializer="json",
        accept_content=["json"],
        task_default_queue="bench.noop",
        task_send_sent_event=True,  # as ours: Flower's "sent" state
        worker_hijack_root_logger=False,
    )
    app.task(name=NOOP_TASK)(noop_task)
    return app


def noop_task() -> None:
    """The peer's task: nothing at all."""


_peer: Celery | None = None


def __getattr__(name: str) -> Any:
    """`celery -A bench.runs_bench:peer` loads the peer app, built on first access."""
    global _peer
    if name == "peer":
        if _peer is None:
            _peer = peer_app(os.environ["BENCH_BROKER"])
        return _peer
    raise AttributeError(name)


POSTGRES_URL = os.environ.get(
    "NIGHTSHIFT_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
"""Where the benches make their databases (`postgres`): `--postgres-url`'s default."""


@contextmanager
def postgres(url: str) -> Iterator[str]:
    name = f"ns_bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(
        make_url(url).set(drivername="postgresql+psycopg2"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(url).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@contextmanager
def processes(
    commands: Sequence[list[str]], env: dict[str, str], logs: Path
) -> Iterator[list[subprocess.Popen[bytes]]]:
    procs = []
    env = {**env, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    for i, argv in enumerate(commands):
        with open(logs / f"proc-{i}.log", "ab") as log:
            procs.append(
                subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=logs)
            )
    try:
        yield procs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def tree_cpu(roots: set[int]) -> float:
    """CPU seconds (user + system) of the processes `roots` and all their descendants,
    including children they already reaped (a prefork pool's recycled processes)."""
    parents, used = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        pid = int(entry)
        parents[pid] = int(fields[1])
        own = int(fields[11]) + int(fields[12])
        reaped = int(fields[13]) + int(fields[14])
        used[pid] = own + (reaped if pid in roots else 0)

    def inside(pid: int) -> bool:
        while pid > 1:
            if pid in roots:
                return True
            pid = parents.get(pid, 0)
        return False

    return sum(ticks for pid, ticks in used.items() if inside(pid)) / CLOCK_TICKS


def pids_cpu(pids: set[int]) -> float:
    total = 0
    for pid in pids:
        try:
            raw = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        total += int(fields[11]) + int(fields[12])
    return total / CLOCK_TICKS


@dataclass
class CpuMeter:
    """CPU seconds spent by the processes that serve one contender: its Celery workers,
    the Redis server (shared; only one contender runs at a time), and for nightshift
    the PostgreSQL server processes of the benchmark database."""

    redis_client: Any
    database_url: str

    def redis(self) -> float:
        info = self.redis_client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    def postgres(self) -> float:
        name = make_url(self.database_url).database
        with create_engine(make_url(self.database_url).set(drivername="postgresql+psycopg2"),
                           poolclass=NullPool).connect() as conn:  # fmt: skip
            pids = set(
                conn.execute(
                    text("SELECT pid FROM pg_stat_activity WHERE datname = :name"), {"name": name}
                ).scalars()
            )
        return pids_cpu(pids)

    def read(self, roots: dict[str, set[int]], with_postgres: bool) -> dict[str, float]:
        found = {name: tree_cpu(pids) for name, pids in roots.items()}
        found["redis"] = self.redis()
        if with_postgres:
            found["postgres"] = self.postgres()
        return found


def timed_batch(send_all: Any, n: int) -> tuple[float, list[Any]]:
    started = time.perf_counter()
    results = send_all(n)
    values = [r.get(timeout=120) for r in results]
    return time.perf_counter() - started, values


PEER_ARGV = [
    sys.executable, "-m", "celery", "-A", "bench.runs_bench:peer", "worker", "-Q", "bench.noop",
    "--loglevel", "INFO", "-E", "-n", "peer@%h", "--concurrency",
]  # fmt: skip
"""The peer worker. The options that cost per task are ours too: task events on (-E,
which Flower needs) and INFO logging, as `celery_command("worker")` starts a run worker."""


@dataclass
class Rounds:
    """Per-round rates of each contender, and the run hooks' timings per agent."""

    rates: dict[str, list[float]] = field(default_factory=dict)
    cpu_ms: dict[str, list[dict[str, float]]] = field(default_factory=dict)  # per task, by part
    timings: dict[str, list[dict[str, float]]] = field(default_factory=dict)

    def ratios(self, name: str) -> list[float]:
        return [ours / peer for ours, peer in zip(self.rates[name], self.rates[PEER], strict=True)]


PEER = "bare Celery no-op task"
NOOP = "nightshift run, no-op python agent"
COMMAND = "nightshift run, command agent"


def interleaved(
    settings: Settings, broker: str, concurrency: int, sizes: dict[str, int], repeat: int,
    logs: Path,
) -> Rounds:  # fmt: skip
    """All workers up at once; each round times one batch of each contender in turn, so
    a noisy neighbour slows the peer and us alike and the per-round ratio stays fair."""
    env = {**os.environ, **settings.to_env(), "BENCH_BROKER": broker}
    peer, ours, rt = peer_app(broker), create_app(settings), Runtime(settings)
    commands = [
        [*PEER_ARGV, str(concurrency)],
        celery_command("worker", concurrency),
        celery_command("writer"),
    ]

    def runs_of(agent: str) -> Any:
        def send_all(k: int) -> list[Any]:
            tag = uuid.uuid4().hex[:8]
            requests = [
                RunRequest(key=f"{agent}-{tag}-{i}", agent=agent, tenant="bench", user="u",
                           trigger_origin="private", goal="benchmark runs")
                for i in range(k)
            ]  # fmt: skip
            with rt.engine.begin() as conn:
                runs.create(conn, requests, datetime.now(UTC))
            return [_send(ours, r) for r in requests]

        return send_all

    senders = {
        PEER: lambda k: [peer.send_task(NOOP_TASK) for _ in range(k)],
        NOOP: runs_of("noop"),
        COMMAND: runs_of("cmd"),
    }
    out = Rounds()
    meter = CpuMeter(redis.Redis.from_url(broker), settings.database_url)
    with processes(commands, env, logs) as procs:
        our_roots = {"run worker": {procs[1].pid}, "writer": {procs[2].pid}}
        roots = {PEER: {"worker": {procs[0].pid}}, NOOP: our_roots, COMMAND: our_roots}
        for send_all in senders.values():
            timed_batch(send_all, 20)  # warm-up: worker start, imports, connections
        for _ in range(repeat):
            for name, send_all in senders.items():
                cpu_before = meter.read(roots[name], with_postgres=name != PEER)
                took, values = timed_batch(send_all, sizes[name])
                # Measured after the batch; the writer may still be applying, which the
                # postgres and writer figures then count in the next batch (small: a no-op
                # run writes nothing, a command run here neither).
                cpu_after = meter.read(roots[name], with_postgres=name != PEER)
                per_task = {
                    k: (cpu_after[k] - v) * 1000 / sizes[name] for k, v in cpu_before.items()
                }
                out.cpu_ms.setdefault(name, []).append(per_task)
                if name != PEER:
                    bad = [v for v in values if v["status"] != "succeeded"]
                    if bad:
                        raise SystemExit(f"{len(bad)} {name} runs did not succeed: {bad[:3]}")
                    out.timings.setdefault(name, []).extend(v["timings"] for v in values)
                out.rates.setdefault(name, []).append(sizes[name] / took)
    rt.engine.dispose()
    ours.close()
    peer.close()
    return out


def _send(app: Celery, request: RunRequest) -> Any:
    send(app, request)
    return app.AsyncResult(task_id(request.key))


def quantiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="tasks/runs per timed batch")
    parser.add_argument("--command-runs", type=int, default=150)
    parser.add_argument("--repeat", type=int, default=5, help="interleaved rounds (median)")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("NIGHTSHIFT_TEST_REDIS_URL", "redis://127.0.0.1:6379/13"),
    )
    parser.add_argument("--postgres-url", default=POSTGRES_URL)
    args = parser.parse_args(argv)
    redis.Redis.from_url(args.redis_url).flushdb()
    with tempfile.TemporaryDirectory() as tmp, postgres(args.postgres_url) as db_url:
        root = Path(tmp)
        program = root / "true.sh"
        program.write_text("#!/bin/sh\nexit 0\n")
        program.chmod(0o755)
        settings = Settings(
            data_dir=root / "data",
            database_url=db_url,
            broker_url=args.redis_url,
            result_backend=args.redis_url,
            agents={"noop": "bench.runs_bench:noop_agent", "cmd": f"command:{program}"},
        )
        rt = Runtime(settings)
        schema.upgrade(rt.engine)
        rt.engine.dispose()
        sizes = {PEER: args.runs, NOOP: args.runs, COMMAND: args.command_runs}
        found = interleaved(settings, args.redis_url, args.concurrency, sizes, args.repeat, root)
    redis.Redis.from_url(args.redis_url).flushdb()
    print(f"broker {args.redis_url}, PostgreSQL, prefork concurrency {args.concurrency}, "
          f"{args.repeat} interleaved rounds")  # fmt: skip
    print(f"{'what':<36}{'median/s':>9}{'ratio':>7}   (per round: rate, ratio to the peer)")
    for name, rates in found.rates.items():
        ratios = [1.0] * len(rates) if name == PEER else found.ratios(name)
        rounds = ", ".join(f"{r:.0f} ({q:.2f})" for r, q in zip(rates, ratios, strict=True))
        print(
            f"{name:<36}{statistics.median(rates):>9.1f}{statistics.median(ratios):>7.2f}   {rounds}"
        )
    noop_t, cmd_t = found.timings[NOOP], found.timings[COMMAND]
    print("\nper-run time inside the worker, ms (median / p99)")
    print(f"{'hook':<14}{'no-op python':>20}{'command':>20}")
    for hook in BREAKDOWN:
        a = quantiles([t.get(hook, 0.0) * 1000 for t in noop_t])
        b = quantiles([t.get(hook, 0.0) * 1000 for t in cmd_t])
        print(f"{hook:<14}{a[0]:>10.2f} / {a[1]:<7.2f}{b[0]:>10.2f} / {b[1]:<7.2f}")
    a = quantiles([sum(t.values()) * 1000 for t in noop_t])
    b = quantiles([sum(t.values()) * 1000 for t in cmd_t])
    print(f"{'all hooks':<14}{a[0]:>10.2f} / {a[1]:<7.2f}{b[0]:>10.2f} / {b[1]:<7.2f}")
    print("\nCPU per task, ms, all processes serving it (workers, Redis; PostgreSQL for ours)")
    peer_cpu = statistics.median(sum(r.values()) for r in found.cpu_ms[PEER])
    for name, rounds in found.cpu_ms.items():
        med = statistics.median(sum(r.values()) for r in rounds)
        parts = ", ".join(
            f"{part} {statistics.median(r[part] for r in rounds):.2f}" for part in rounds[0]
        )
        print(f"{name:<36}{med:>9.2f}   peer/ours = {peer_cpu / med:.2f}   ({parts})")
    target = statistics.median(found.ratios(NOOP))
    print(f"\nno-op run rate / bare task rate, median of rounds = {target:.2f} (target ≥ 0.40)")


if __name__ == "__main__":
    main()
