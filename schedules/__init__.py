"""When agents run: schedule definitions, their files, next-fire arithmetic, and the beat.

- `schedules.definition` — the frozen records (`Schedule`, `Cron`, `Heartbeat`,
  `Event`) and their validation.
- `schedules.timing` — pure next-fire arithmetic with the DST policy.
- `schedules.files` — loading definitions from TOML and YAML files.
- `schedules.catalog` — applied schedules in the database and beat's progress.
- `schedules.policy` — catch-up and overlap decisions (pure).
- `schedules.fires` — run keys, and the record of what became of each fire.
- `schedules.lease` — the leader lease that lets one beat fire.
- `schedules.beat` — the heap-ordered, leader-elected Celery beat scheduler.
- `schedules.api` — list, show, next, pause, resume, trigger, backfill from Python.
- `schedules.ports` — `RunPort`, what this package needs from the run system.

This package imports nothing from `memory/` or `workers/`; `workers/beat.py` wires it.
"""
