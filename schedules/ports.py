"""What `schedules/` needs from the rest of the system, as one narrow port.

Runs live in `workers/` (their table, the Celery app, revoking tasks). The beat
and the `schedules.api` operations reach them only through `RunPort`, which the
composition root (`workers/beat.py`) implements; this package therefore imports
nothing from `workers/` or `memory/`. Tests use `tests`' in-memory recorder.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from schedules.fires import Fire


@dataclass(frozen=True, slots=True)
class RunSummary:
    """A run as `schedules show` lists it."""

    key: str
    status: str
    fire_time: datetime | None
    enqueued_at: datetime | None
    finished_at: datetime | None
    note: str = ""

    def to_json(self) -> dict[str, object]:
        return {
            "key": self.key,
            "status": self.status,
            "fire_time": self.fire_time.isoformat() if self.fire_time else None,
            "enqueued_at": self.enqueued_at.isoformat() if self.enqueued_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "note": self.note,
        }


class RunsRefusedError(Exception):
    """`RunPort.enqueue` could not create the runs of some fires: their rows hold a
    value the run store refuses (a stored definition from before a check, say). The
    other fires' runs were created and sent as usual."""

    def __init__(self, created: Sequence[str], refused: Mapping[str, str]) -> None:
        super().__init__(f"{len(refused)} run(s) refused: {', '.join(sorted(refused))}")
        self.created = list(created)  # run keys created and sent
        self.refused = dict(refused)  # run key -> why, never quoting the values


class RunPort(Protocol):
    def enqueue(self, fires: Sequence[Fire], now: datetime) -> list[str]:
        """Create and send a run per fire whose run key is new; return the new keys.

        A key that exists already is neither created nor sent again. Fires whose run
        the store refuses raise `RunsRefusedError` after the others were sent."""
        ...

    def active(self, schedules: Collection[str]) -> dict[str, list[str]]:
        """Run keys still queued or running, per schedule name (oldest first)."""
        ...

    def cancel(self, keys: Sequence[str], reason: str, now: datetime) -> None:
        """Stop these runs: mark them finished and terminate their tasks."""
        ...

    def recent(self, schedule: str, limit: int) -> list[RunSummary]:
        """The schedule's latest runs, newest first."""
        ...


def enqueue_fires(
    runs: RunPort, fires: Sequence[Fire], now: datetime
) -> tuple[set[str], dict[str, str]]:
    """`runs.enqueue(fires, now)` as the run keys created and the run keys refused,
    with why: what the beat, trigger and backfill record for each fire."""
    if not fires:
        return set(), {}
    try:
        return set(runs.enqueue(fires, now)), {}
    except RunsRefusedError as error:
        return set(error.created), error.refused
