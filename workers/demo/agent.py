"""feed-watcher: reads a local incident feed, handles a few new incidents per run.

It knows what it handled only from memory: each handled incident becomes an
`observed` fact keyed `incident.<id>`, so the next run (in a new, empty sandbox)
loads those facts and skips them. Point `NIGHTSHIFT_DEMO_FEED` at another JSON
lines file to watch your own feed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from workers.agents import AgentResult, RunContext

FEED = Path(__file__).with_name("feed.jsonl")
PER_RUN = 3


def feed_watcher(ctx: RunContext) -> AgentResult:
    feed = Path(os.environ.get("NIGHTSHIFT_DEMO_FEED", FEED))
    handled = {
        m.key.removeprefix("incident.") for m in ctx.memories if m.key.startswith("incident.")
    }
    incidents = [json.loads(line) for line in feed.read_text().splitlines() if line.strip()]
    new = [i for i in incidents if i["id"] not in handled][:PER_RUN]
    for number, incident in enumerate(new, start=1):
        ctx.remember(
            f"{incident['id']} on {incident['service']} ({incident['severity']}): "
            f"{incident['text']}",
            key=f"incident.{incident['id']}",
            source="observed",
            reference=f"{feed.name}#{incident['id']}",
        )
        (ctx.sandbox / f"triage-{number}.md").write_text(f"triaged {incident['id']}\n")
    skipped = len(handled & {i["id"] for i in incidents})
    return AgentResult(
        summary=(
            f"skipped {skipped} already handled, handled {len(new)} new"
            + (f" ({', '.join(i['id'] for i in new)})" if new else " — feed is caught up")
        )
    )
