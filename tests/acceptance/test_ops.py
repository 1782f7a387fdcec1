"""Operating a real deployment: Flower seen through a browser, metrics scraped over HTTP."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import signal
import socket
import subprocess
import urllib.request
from base64 import b64encode
from pathlib import Path

import pytest

from tests.acceptance.harness import System
from tests.services import IN_CI

pytestmark = pytest.mark.acceptance

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str, auth: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if auth:
        request.add_header("Authorization", "Basic " + b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""
    except OSError:
        return 0, ""


def trigger_demo_run(system: System) -> None:
    result = system.cli("trigger", "feed-watcher", "--tenant", "acme", "--user", "ana", "--wait")
    assert result.returncode == 0 and "succeeded" in result.stdout, result.stdout + result.stderr


def sample(text: str, name: str) -> float:
    """The value of one sample in Prometheus text format (0 when absent)."""
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


def task_rows(html: str) -> list[list[str]]:
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", html, re.S)
    return [
        [
            re.sub(r"<[^>]+>", "", cell).strip()
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        ]
        for row in rows
    ]


@pytest.mark.parametrize("system", ["embedded"], indirect=True)
def test_flower_in_a_browser_shows_a_finished_run_by_its_agent(system: System) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        message = "chromium is not installed (.ci/run installs Debian's chromium)"
        pytest.fail(message) if IN_CI else pytest.skip(f"SKIPPED LOUDLY: {message}")
    port, auth = free_port(), "ops:correct-horse"
    env = {"NIGHTSHIFT_FLOWER_PORT": str(port), "NIGHTSHIFT_FLOWER_BASIC_AUTH": auth}
    system.serve("flower", "flower", env=env)
    base = f"http://127.0.0.1:{port}"
    system.wait_for("flower to answer", lambda: get(f"{base}/healthcheck")[0] == 200)
    assert get(f"{base}/tasks")[0] == 401 and get(f"{base}/metrics")[0] == 401
    system.start("worker")
    system.start("writer")
    trigger_demo_run(system)

    def rendered() -> list[list[str]] | None:
        page = subprocess.run(
            [
                chromium,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={system.root / 'chrome'}",
                "--virtual-time-budget=8000",
                "--dump-dom",
                f"http://{auth}@127.0.0.1:{port}/tasks",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        return [r for r in task_rows(page.stdout) if any("agent='feed-watcher'" in c for c in r)]

    [run_row] = system.wait_for("the run in Flower's task table", rendered, timeout=90)
    assert run_row[0] == "nightshift.run" and "SUCCESS" in run_row
    assert "scope='acme/ana'" in " ".join(run_row)
    assert "INC-101" not in " ".join(run_row)  # memory content never shows as an argument


@pytest.mark.parametrize("system", ["embedded"], indirect=True)
def test_metrics_endpoint_counters_move_after_a_run(system: System) -> None:
    port = free_port()
    system.serve("metrics", "metrics", "--port", str(port))
    url = f"http://127.0.0.1:{port}/metrics"
    before = system.wait_for("the exporter", lambda: get(url)[1])
    assert "nightshift_runs_total{" not in before
    system.start("worker")
    system.start("writer")
    trigger_demo_run(system)

    def moved() -> str | None:
        text = get(url)[1]
        return (
            text
            if sample(text, 'nightshift_write_decisions_total{outcome="stored"}') >= 3
            else None
        )

    after = system.wait_for("the write to be counted", moved)
    assert sample(after, 'nightshift_runs_total{agent="feed-watcher",status="succeeded"}') == 1


@pytest.mark.parametrize("system", ["redis-postgres"], indirect=True)
def test_status_names_a_worker_that_serves_another_database(system: System) -> None:
    def checks() -> dict[str, dict[str, object]] | None:
        found = json.loads(system.cli("status", "--json", "--max-write-lag", "1e9").stdout)
        named = {c["name"]: c for c in found["checks"]}
        answering = all(named[n]["value"] for n in ("run workers", "memory writer"))
        return named if answering else None

    system.start("worker")
    system.start("writer", env={"NIGHTSHIFT_DATABASE_URL": f"sqlite:///{system.root}/other.db"})
    named = system.wait_for("both workers to answer", checks)
    assert named["run workers"]["ok"]
    writer = named["memory writer"]
    assert not writer["ok"]
    assert "1 on another database" in str(writer["detail"])
    assert f"serves sqlite:///{system.root}/other.db" in str(writer["detail"])

    # The same database by another name (localhost for 127.0.0.1) is the same database.
    system.kill("writer", signal.SIGTERM)
    alias = system.env["NIGHTSHIFT_DATABASE_URL"].replace("127.0.0.1", "localhost")
    assert alias != system.env["NIGHTSHIFT_DATABASE_URL"]
    system.start("writer", env={"NIGHTSHIFT_DATABASE_URL": alias})
    named = system.wait_for("the writer to answer again", checks)
    assert named["memory writer"]["ok"], named["memory writer"]["detail"]


@pytest.mark.parametrize("system", ["embedded"], indirect=True)
def test_flower_asks_for_its_password_and_no_command_line_shows_it(system: System) -> None:
    port, auth = free_port(), "ops:correct-horse"
    env = {"NIGHTSHIFT_FLOWER_PORT": str(port), "NIGHTSHIFT_FLOWER_BASIC_AUTH": auth}
    system.serve("flower", "flower", env=env)
    base = f"http://127.0.0.1:{port}"
    system.wait_for("flower to answer", lambda: get(f"{base}/healthcheck")[0] == 200)
    assert get(f"{base}/tasks")[0] == 401 and get(f"{base}/metrics")[0] == 401
    assert get(f"{base}/tasks", auth)[0] == 200 and get(f"{base}/metrics", auth)[0] == 200
    command_lines = _command_lines()
    assert any(b"workers.flower" in c for c in command_lines)
    assert not [c for c in command_lines if b"correct-horse" in c]


def _command_lines() -> list[bytes]:
    """Every process's command line, as `ps` shows it to any user of the machine."""
    found = []
    for path in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):  # a process that ended meanwhile
            found.append(path.read_bytes())
    return found
