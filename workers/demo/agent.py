"""feed-watcher: reads a local incident feed, handles a few new incidents per run.

It knows what it handled only from memory: each handled incident becomes an
`observed` fact keyed `incident.<id>`, so the next run (in a new, empty sandbox)
loads those facts and skips them. Point `NIGHTSHIFT_DEMO_FEED` at another JSON
lines file to watch your own feed.

An event brings incidents of its own: `nightshift trigger feed-watcher --payload
FILE` with `{"incidents": [{"id": …, "service": …, "severity": …, "text": …}]}`.
They are handled before the feed's, all of them, and like everything from outside
they reach memory only through the writer's gate (an incident whose text gives
orders is refused there). An entry that is not an incident is named in the run's
problems, and the run ends partial.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from workers.agents import AgentResult, RunContext

FEED = Path(__file__).with_name("feed.jsonl")
PER_RUN = 3
FIELDS = ("id", "service", "severity", "text")


def feed_watcher(ctx: RunContext) -> AgentResult:
    feed = Path(os.environ.get("NIGHTSHIFT_DEMO_FEED", FEED))
    handled = {
        m.key.removeprefix("incident.") for m in ctx.memories if m.key.startswith("incident.")
    }
    brought, problems = event_incidents(ctx.trigger.payload)
    incidents = [json.loads(line) for line in feed.read_text().splitlines() if line.strip()]
    new_brought = _unique(i for i in brought if i["id"] not in handled)
    new = new_brought + [i for i in incidents if i["id"] not in handled][:PER_RUN]
    for number, incident in enumerate(new, start=1):
        came_by_event = number <= len(new_brought)
        ctx.remember(
            f"{incident['id']} on {incident['service']} ({incident['severity']}): "
            f"{incident['text']}",
            key=f"incident.{incident['id']}",
            source="observed",
            reference=f"{'event' if came_by_event else feed.name}#{incident['id']}",
        )
        (ctx.sandbox / f"triage-{number}.md").write_text(f"triaged {incident['id']}\n")
    skipped = len(handled & {i["id"] for i in [*brought, *incidents]})
    return AgentResult(
        summary=(
            f"skipped {skipped} already handled, handled {len(new)} new"
            + (f" ({', '.join(i['id'] for i in new)})" if new else " — feed is caught up")
        ),
        problems=problems,
    )


def event_incidents(payload: Mapping[str, Any]) -> tuple[list[dict[str, str]], list[str]]:
    """The incidents an event's payload brings, and a problem for each entry that is not
    one: an object whose id, service, severity and text are strings, the id non-empty."""
    entries = payload.get("incidents", [])
    if not isinstance(entries, list):
        return [], [f"payload 'incidents' must be a list, got {type(entries).__name__}"]
    incidents, problems = [], []
    for n, entry in enumerate(entries):
        missing = [
            f
            for f in FIELDS
            if not isinstance(entry, dict) or not isinstance(entry.get(f), str) or not entry[f]
        ]
        if missing:
            problems.append(
                f"payload incidents[{n}]: needs a non-empty string {', '.join(missing)}"
            )
        else:
            incidents.append({f: entry[f] for f in FIELDS})
    return incidents, problems


def _unique(incidents: Any) -> list[dict[str, str]]:
    """The first of each id: an event naming an incident twice handles it once."""
    seen: dict[str, dict[str, str]] = {}
    for incident in incidents:
        seen.setdefault(incident["id"], incident)
    return list(seen.values())
