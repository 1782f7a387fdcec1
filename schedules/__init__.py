"""When agents run: schedule definitions, their files, and next-fire arithmetic.

- `schedules.definition` — the frozen records (`Schedule`, `Cron`, `Heartbeat`,
  `Event`) and their validation.
- `schedules.timing` — pure next-fire arithmetic with the DST policy.
- `schedules.files` — loading definitions from TOML and YAML files.

This package imports nothing from `memory/` or `workers/`.
"""
