"""What a Celery worker does once, as it starts."""

from __future__ import annotations

import gc

from celery.signals import worker_init

import workers.tasks  # noqa: F401  (connects the worker's signal handlers)


def test_a_starting_worker_takes_what_it_imported_out_of_the_collectors_reach() -> None:
    gc.unfreeze()
    try:
        worker_init.send(sender=None)
        assert gc.get_freeze_count() > 10_000  # the imports: celery, SQLAlchemy, nightshift
    finally:
        gc.unfreeze()
