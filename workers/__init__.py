"""The composition root: the Celery app, the run and writer tasks, the CLI.

Imports `memory/` and `schedules/`; neither imports this package.
"""
