"""Real processes for acceptance tests: celery workers, beat and the CLI.

Waiting here polls the database for a condition with a deadline; nothing sleeps
to let time pass.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine
from sqlalchemy.engine import make_url

from memory.engine import open_engine
from memory.tables import receipts
from workers import runs
from workers.cli.supervisor import celery_command
from workers.runs import Run
from workers.settings import AMQP_SCHEMES

T = TypeVar("T")

FAST = {
    "NIGHTSHIFT_LEASE_SECONDS": "3",
    "NIGHTSHIFT_REAPER_INTERVAL": "1",
    "NIGHTSHIFT_BEAT_RELOAD_SECONDS": "1",
    "NIGHTSHIFT_AGENTS": "gated=tests.acceptance.agents:gated",
}


@dataclass
class System:
    root: Path
    env: dict[str, str]
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def engine(self) -> Engine:
        if not hasattr(self, "_engine"):
            self._engine = open_engine(self.env["NIGHTSHIFT_DATABASE_URL"])
        return self._engine

    def cli(
        self, *args: str, env: dict[str, str] | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "workers.cli", *args],
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
        )

    def start(
        self, role: str, name: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.Popen[bytes]:
        name = name or role
        with open(self.root / f"{name}.log", "ab") as log:  # the child keeps its own copy
            proc = subprocess.Popen(
                celery_command(role, concurrency=2),
                env={**self.env, **(env or {})},
                cwd=self.root,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs[name] = proc
        return proc

    def serve(self, name: str, *args: str, env: dict[str, str] | None = None) -> None:
        """Start `nightshift ARGS…` (a writer shard, the exporter, Flower) as process `name`."""
        with open(self.root / f"{name}.log", "ab") as log:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "workers.cli", *args],
                env={**self.env, **(env or {})},
                cwd=self.root,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def kill(self, name: str, sig: int = signal.SIGKILL) -> None:
        proc = self.procs.pop(name)
        with _suppress_lookup():
            os.killpg(proc.pid, sig)
        proc.wait(timeout=30)

    def stop(self) -> None:
        for name in list(self.procs):
            proc = self.procs[name]
            with _suppress_lookup():
                os.killpg(proc.pid, signal.SIGTERM)
        for name in list(self.procs):
            proc = self.procs.pop(name)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()

    def discard(self) -> None:
        """SIGKILL every process group and wait: a test's teardown, once its assertions
        are made. A warm shutdown (`stop`) lets each worker finish what it holds, some
        seconds per worker on the folder broker, for a system about to be thrown away."""
        for name in list(self.procs):
            proc = self.procs.pop(name)
            with _suppress_lookup():
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    def runs(self) -> list[Run]:
        with self.engine.connect() as conn:
            return runs.recent(conn, limit=1000)

    def logs(self) -> str:
        return "\n".join(
            f"--- {p.name}\n{p.read_text(errors='replace')[-4000:]}"
            for p in sorted(self.root.glob("*.log"))
        )

    def wait_for(self, what: str, probe: Callable[[], T | None], timeout: float = 60) -> T:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = probe()
            if value:
                return value
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise AssertionError(
                        f"{name} exited ({proc.returncode}) while waiting for {what}\n{self.logs()}"
                    )
            time.sleep(0.1)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{self.logs()}")


def has_receipt(system: System, handle: str) -> bool:
    with system.engine.connect() as conn:
        found = receipts.select().where(receipts.c.handle == handle)
        return conn.execute(found).first() is not None


def stop_pool(system: System, name: str) -> None:
    """SIGSTOP the pool processes of worker `name` once it is ready: it still takes
    messages (and holds them unacknowledged) but runs nothing."""
    log = system.root / f"{name}.log"
    system.wait_for(f"{name} to be ready", lambda: " ready." in log.read_text())
    main = system.procs[name].pid
    for child in Path(f"/proc/{main}/task/{main}/children").read_text().split():
        os.kill(int(child), signal.SIGSTOP)


@contextmanager
def _suppress_lookup() -> Iterator[None]:
    with suppress(ProcessLookupError):
        yield


def base_env(root: Path, database_url: str, broker_url: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NIGHTSHIFT_")}
    env.update(FAST)
    env["NIGHTSHIFT_DATA_DIR"] = str(root / "data")
    env["NIGHTSHIFT_DATABASE_URL"] = database_url
    env["NIGHTSHIFT_TEST_CONTROL"] = str(root / "control")
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    if broker_url:
        env["NIGHTSHIFT_BROKER_URL"] = broker_url
        env["NIGHTSHIFT_RESULT_BACKEND"] = results_for(broker_url, database_url)
    (root / "control").mkdir(exist_ok=True)
    return env


def results_for(broker_url: str, database_url: str) -> str:
    """The result backend: the broker itself, or on RabbitMQ (Celery has no AMQP result
    backend) the database, as the README tells a RabbitMQ operator."""
    if not broker_url.startswith(AMQP_SCHEMES):
        return broker_url
    url = make_url(database_url).set(drivername="postgresql+psycopg2")
    return "db+" + url.render_as_string(hide_password=False)


class FakeChat:
    """A local OpenAI-compatible endpoint that replays scripted replies and keeps requests."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(
                    {"path": self.path, "auth": self.headers["Authorization"], **body}
                )
                reply = outer.replies.pop(0) if outer.replies else chat_text("done")
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> FakeChat:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def chat_calls(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A chat completion that calls `calls` as tools (for `FakeChat`)."""
    return {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"call-{i}",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)},
                        }
                        for i, (name, args) in enumerate(calls)
                    ],
                }
            }
        ],
        "usage": {"total_tokens": 100},
    }


def chat_text(content: str) -> dict[str, Any]:
    """A chat completion that answers with text and no tool call: the loop's last step."""
    return {
        "choices": [{"message": {"role": "assistant", "content": content}}],
        "usage": {"total_tokens": 50},
    }
