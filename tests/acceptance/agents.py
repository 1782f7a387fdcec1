"""Agents used by the acceptance tests, run by real workers."""

from __future__ import annotations

import os
import time
from pathlib import Path

from workers.agents import AgentResult, RunContext


def gated(ctx: RunContext) -> AgentResult:
    """Signals it started, then waits for the test to open the gate (or 60 s).

    The first attempt is killed by the test while it waits; the retry finds the
    gate open and finishes at once.
    """
    control = Path(os.environ["NIGHTSHIFT_TEST_CONTROL"])
    (control / f"started-{os.getpid()}").write_text(ctx.run_key)
    deadline = time.monotonic() + 60
    while not (control / "open").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    ctx.remember(
        "checked the payments queue", key="check.payments", source="observed", reference="queue#1"
    )
    ctx.remember("payments queue depth 12", source="observed", reference="queue#2")
    return AgentResult(summary="checked")
