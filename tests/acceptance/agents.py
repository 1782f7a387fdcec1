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


def planner(ctx: RunContext) -> AgentResult:
    """Starts two researchers and cancels the second; finishes before either does."""
    ctx.spawn("researcher", name="prices", goal="find the current price")
    slow = ctx.spawn("researcher", name="history", goal="dig through old prices")
    slow.cancel()
    return AgentResult(summary="asked two researchers", tried="spawn two, cancel one")


def researcher(ctx: RunContext) -> AgentResult:
    """A subagent: `history` works until it is cancelled (or 60 s); `prices` answers at once."""
    deadline = time.monotonic() + 60
    while ctx.subagent == "history" and not ctx.cancelled() and time.monotonic() < deadline:
        time.sleep(0.05)
    ctx.remember(f"{ctx.subagent}: the price is 12 EUR", source="observed", reference="shop#1")
    return AgentResult(summary=f"{ctx.subagent} done")


def noop(ctx: RunContext) -> AgentResult:
    """Does nothing: what the benchmark and the fault tests measure runs with."""
    return AgentResult()


def steady(ctx: RunContext) -> AgentResult:
    """Remembers one fact named after its run, slowly enough to be killed mid-run."""
    control = Path(os.environ["NIGHTSHIFT_TEST_CONTROL"])
    (control / f"started-{ctx.run_key.replace('/', '_')}").write_text(str(os.getpid()))
    deadline = time.monotonic() + float(ctx.trigger.payload.get("work_seconds", 0.3))
    while time.monotonic() < deadline and not (control / "fast").exists():
        time.sleep(0.02)
    ctx.remember(f"done {ctx.run_key}", key=f"done.{ctx.run_key}", source="observed", reference="t")
    return AgentResult(summary="done")


def bulk(ctx: RunContext) -> AgentResult:
    """Remembers many facts at once, so the writer spends a while on each batch."""
    count = int(ctx.trigger.payload.get("facts", 100))
    for j in range(count):
        ctx.remember(
            f"bulk fact {j} of {ctx.run_key}",
            source="observed",
            reference=f"bulk#{j}",
        )
    return AgentResult(summary=f"remembered {count}")


def voter(ctx: RunContext) -> AgentResult:
    """Votes down the memory id in its payload. Refused, it goes round `ctx.vote` (as
    code running in the worker could) so the vote reaches the writer's own check."""
    from workers.agents import Vote, VoteRefused

    memory_id = str(ctx.trigger.payload["memory_id"])
    try:
        ctx.vote(memory_id, "down")
    except VoteRefused as error:
        ctx.votes.append(Vote(memory_id, "down"))
        return AgentResult(summary=f"refused: {error}")
    return AgentResult(summary="voted")


def planter(ctx: RunContext) -> AgentResult:
    """Passes on what a feed said, as observed content, and reports the goal it was given."""
    said = str(ctx.trigger.payload.get("feed", ""))
    if said:
        ctx.remember(said, source="observed", reference="feed#1", key="goal")
        ctx.remember(said, source="observed", reference="feed#2")
    return AgentResult(summary=f"goal: {ctx.goal}")


def spawner(ctx: RunContext) -> AgentResult:
    """Starts a `helper` subagent with the goal in its payload."""
    ctx.spawn("helper", name="h1", goal=str(ctx.trigger.payload["goal"]))
    return AgentResult(summary="asked a helper")


def confider(ctx: RunContext) -> AgentResult:
    """Remembers the payload's notes in the agent layer, as an agent that learns from
    one person for all would; reports what it was given."""
    for note in ctx.trigger.payload.get("notes", ()):
        ctx.remember(str(note), source="observed", reference="dm#1", layer="agent")
    return AgentResult(summary=" | ".join(m.content for m in ctx.memories))


def crasher(ctx: RunContext) -> AgentResult:
    """Takes its worker process down with it (as running out of memory, or a fault in
    native code, would): the run can never finish, however often it is sent."""
    import signal

    os.kill(os.getpid(), signal.SIGKILL)
    return AgentResult()


LEAKED_TOKEN = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789AB"


def leaker(ctx: RunContext) -> AgentResult:
    """Fails quoting its own credential (a payload's secrets are redacted before any
    agent sees them; its configuration's are not), as a careless agent's error would."""
    raise RuntimeError(f"login refused for token {LEAKED_TOKEN}")


def stubborn(ctx: RunContext) -> AgentResult:
    """Ignores the soft time limit (catches it and works on) until the hard limit kills
    its process, or 60 s; leaves work in its sandbox."""
    from celery.exceptions import SoftTimeLimitExceeded

    (ctx.sandbox / "half-done.txt").write_text("x")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            time.sleep(0.05)
        except SoftTimeLimitExceeded:
            (ctx.sandbox / "ignored-the-soft-limit").write_text("x")
    return AgentResult(summary="outlived its time limit")
