"""Secrets kept out of the logs.

A run's error is redacted before it is stored, but the same exception reached the
worker's log whole: "run failed" logs its traceback, whose last line is the
exception's message, and an agent's exception can quote the token it was given.
Every handler Celery sets up (the root logger's, which the redirected stdout of a
Python agent also reaches, and the task logger's) gets `RedactingFilter`, which
passes each record's message, traceback and stack through `memory.redaction.redact`
before any formatter sees it. A record without a secret is left as it was.
"""

from __future__ import annotations

import logging
from typing import Any

from celery.signals import after_setup_logger, after_setup_task_logger

from memory.redaction import redact

_TRACEBACKS = logging.Formatter()
"""Formats a record's exception as any handler's formatter would (`exc_text`, once
set, is what every `logging.Formatter` prints instead of formatting it again)."""


class RedactingFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if (redacted := redact(message)) is not message:
            record.msg, record.args = redacted, None
        if record.exc_info and not record.exc_text:
            record.exc_text = _TRACEBACKS.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


REDACTING = RedactingFilter()


def redact_handlers(logger: logging.Logger) -> None:
    """Put `REDACTING` on each of `logger`'s handlers (once)."""
    for handler in logger.handlers:
        if REDACTING not in handler.filters:
            handler.addFilter(REDACTING)


def _redact_celery_logs(logger: logging.Logger, **_: Any) -> None:
    redact_handlers(logger)


def connect() -> None:
    """Redact the handlers Celery sets up in this process (worker, writer and beat)."""
    after_setup_logger.connect(_redact_celery_logs, weak=False)
    after_setup_task_logger.connect(_redact_celery_logs, weak=False)
