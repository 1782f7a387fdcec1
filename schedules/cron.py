"""Cron expressions: parsed and checked once, with a precise complaint when wrong.

Five fields (minute hour day-of-month month day-of-week), or six with seconds
last, or an alias such as `@daily`; evaluated by croniter. `compile_cron` is
cached because beat evaluates thousands of schedules that share a handful of
expressions. Time zones and DST are `schedules.timing`'s concern.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from croniter import CroniterBadDateError, CroniterError, croniter

from schedules.errors import DefinitionError

CRON_ALIASES: Mapping[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

# (name, lowest, highest) per croniter field position; the 6th field is seconds.
_CRON_FIELDS = (
    ("minute", 0, 59),
    ("hour", 0, 23),
    ("day-of-month", 1, 31),
    ("month", 1, 12),
    ("day-of-week", 0, 7),
    ("second", 0, 59),
)
_HASHED_PART = re.compile(r"^[hr](\(\d+-\d+\))?(/\d+)?$", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class CompiledCron:
    """A parsed cron expression; `template` is copied, never iterated directly."""

    expression: str  # with aliases replaced
    template: croniter
    every_hour: bool  # the hour field matches all 24 hours (not hour-pinned)


def _cron_fault(fields: list[str]) -> str | None:
    """A precise complaint about the first out-of-range number or bad step, if any."""
    for (label, low, high), text in zip(_CRON_FIELDS, fields, strict=False):
        for part in text.split(","):
            if _HASHED_PART.match(part):
                return f"{label}: hashed/random values ('H', 'R') are not supported"
            base, _, step = part.partition("/")
            if step and (not step.isdigit() or int(step) == 0):
                return f"{label} step must be a positive whole number, got {step!r}"
            for number in base.split("-"):
                if number.isdigit() and not low <= int(number) <= high:
                    return f"{label} must be {low}-{high}"
    return None


def _croniter_complaint(exc: Exception) -> str:
    lines = str(exc).strip().splitlines() or ["unrecognised"]
    message = re.sub(r"^\[[^\]]*\]\s*", "", lines[0])  # croniter echoes the expression
    return message.removeprefix("is ").strip() or "unrecognised"


@functools.lru_cache(maxsize=4096)
def compile_cron(expression: str) -> CompiledCron:
    """Parse and check `expression` once; cached because the beat evaluates
    thousands of schedules that share a handful of expressions."""
    text = " ".join(expression.split()) if isinstance(expression, str) else ""
    if not text:
        raise DefinitionError("expression", "cron expression is empty")
    if text.startswith("@"):
        alias = CRON_ALIASES.get(text.lower())
        if alias is None:
            raise DefinitionError(
                "expression",
                f"unknown cron alias {text!r}; use one of {', '.join(CRON_ALIASES)}",
            )
        text = alias
    fields = text.split(" ")
    if len(fields) not in (5, 6):
        raise DefinitionError(
            "expression",
            f"invalid cron expression {expression!r}: expected 5 fields "
            "(minute hour day-of-month month day-of-week) or 6 (… second), "
            f"got {len(fields)}",
        )
    fault = _cron_fault(fields)
    if fault is None:
        try:
            template = croniter(text, datetime(2000, 1, 1))
            copy.copy(template).get_next(datetime)
        except CroniterBadDateError:
            fault = "no date ever matches it"
        except (CroniterError, ValueError, TypeError) as exc:
            fault = _croniter_complaint(exc)
    if fault is not None:
        raise DefinitionError("expression", f"invalid cron expression {expression!r}: {fault}")
    return CompiledCron(
        expression=text, template=template, every_hour=template.expanded[1] == ["*"]
    )
