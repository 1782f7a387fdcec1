"""One run, start to finish: claim → sandbox → load → project → agent → submit → record.

The sandbox is deleted on every path out of `execute`: success, an agent's
exception, a soft time limit. A hard kill cannot run `finally`; the reaper's
sweep removes what it leaves. Memory candidates leave the run only through
`submit` (the memory-writer queue); this module never writes memory itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from memory.engine import retrying
from memory.records import Candidate, Scope, content_hash
from memory.secrets import redact
from memory.store import LoadBounds
from workers import runs
from workers.agents import AgentResult, RunContext, Trigger, UnknownAgentError, resolve
from workers.projection import project
from workers.runs import Run, RunStatus
from workers.runtime import Runtime
from workers.sandbox import sandbox

log = logging.getLogger(__name__)

Submit = Callable[[str, str, list[dict[str, Any]]], None]
Clock = Callable[[], datetime]


@dataclass(frozen=True, slots=True)
class Outcome:
    key: str
    status: str  # a RunStatus, or "skipped" when another worker has (or had) the run
    loaded: int = 0
    candidates: int = 0
    summary: str = ""
    error: str = ""


def execute(
    rt: Runtime,
    key: str,
    *,
    submit: Submit,
    clock: Clock,
    time_limit_errors: tuple[type[BaseException], ...] = (),
) -> Outcome:
    owner = rt.worker_id
    lease = timedelta(seconds=rt.settings.lease_seconds)
    run = _claim(rt, key, owner, clock(), lease)
    if run is None:
        return Outcome(key, "skipped", summary="already claimed or finished")
    status, error, summary, submitted, loaded = RunStatus.FAILED, "", "", 0, 0
    handle = f"write:{key}"
    with _LeaseKeeper(rt, key, owner, lease, clock):
        try:
            with sandbox(rt.settings.sandbox_root, key) as box:
                agent = resolve(run.agent, rt.settings.agents)
                ctx = _context(rt, run, box)
                loaded = len(ctx.memories)
                result = agent(ctx) or AgentResult()
                candidates = [
                    _with_idempotency(c, key) for c in (*ctx.candidates, *result.candidates)
                ]
                if candidates:
                    submit(handle, key, [c.to_json() for c in candidates])
                status, summary, submitted = RunStatus.SUCCEEDED, result.summary, len(candidates)
        except time_limit_errors:
            status, error = RunStatus.TIMED_OUT, f"time limit of {run.time_limit}s exceeded"
        except UnknownAgentError as e:
            error = str(e)
        except Exception as e:  # an agent may raise anything; the run records it
            error = redact(f"{type(e).__name__}: {e}")
            log.exception("run failed", extra={"action": "run.failed", "run_key": key})
    _finish(
        rt,
        key,
        owner,
        clock(),
        status=status,
        candidates=submitted,
        write_handle=handle if submitted else "",
        summary=redact(summary),
        error=error,
    )
    return Outcome(key, status.value, loaded, submitted, summary, error)


def _context(rt: Runtime, run: Run, box: Any) -> RunContext:
    scope = Scope(run.tenant, run.user, run.agent)
    trigger = Trigger(
        kind=run.trigger_kind,
        origin=run.trigger_origin,
        fire_time=run.fire_time,
        payload=run.payload,
    )
    bounds = LoadBounds(limit=rt.settings.load_limit, max_chars=rt.settings.load_max_chars)
    loaded = rt.store.load(scope, goal=run.goal, trigger=_trigger_text(run), bounds=bounds)
    project(box, loaded, goal=run.goal, trigger=trigger)
    with rt.engine.begin() as conn:
        runs.record_start(conn, run.key, sandbox=str(box), loaded_ids=loaded.ids)
    return RunContext(
        run_key=run.key,
        agent=run.agent,
        scope=scope,
        goal=run.goal,
        trigger=trigger,
        memories=(*loaded.hot, *loaded.ranked),
        sandbox=box,
        schedule=run.schedule,
    )


def _trigger_text(run: Run) -> str:
    """Words of the payload for ranking only; bounded so a huge payload costs nothing."""
    words = [str(v) for v in run.payload.values() if isinstance(v, str | int | float)]
    return " ".join(words)[:2000]


def _with_idempotency(candidate: Candidate, run_key: str) -> Candidate:
    """Default key: the run key and the slot, so a re-run of the same key writes nothing new."""
    if candidate.idempotency_key:
        return candidate
    slot = candidate.key or content_hash(candidate.content)
    return candidate.replace(idempotency_key=f"{run_key}:{slot}")


@retrying()
def _claim(rt: Runtime, key: str, owner: str, now: datetime, lease: timedelta) -> Run | None:
    with rt.engine.begin() as conn:
        return runs.claim(conn, key, owner, now, lease)


@retrying()
def _finish(rt: Runtime, key: str, owner: str, now: datetime, **outcome: Any) -> None:
    with rt.engine.begin() as conn:
        if not runs.finish(conn, key, owner, now, **outcome):
            log.warning(
                "lost the lease before finishing; another worker owns the run",
                extra={"action": "run.lease_lost", "run_key": key},
            )


class _LeaseKeeper:
    """Renews the run's lease every third of its length while the agent works."""

    def __init__(self, rt: Runtime, key: str, owner: str, lease: timedelta, clock: Clock):
        self._rt, self._key, self._owner, self._lease, self._clock = rt, key, owner, lease, clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"lease:{key}", daemon=True)

    def __enter__(self) -> _LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        interval = self._lease.total_seconds() / 3
        while not self._stop.wait(interval):
            try:
                with self._rt.engine.begin() as conn:
                    if not runs.renew(conn, self._key, self._owner, self._clock(), self._lease):
                        return
            except Exception:
                log.warning(
                    "lease renewal failed; will retry",
                    exc_info=True,
                    extra={"action": "run.lease_retry", "run_key": self._key},
                )
