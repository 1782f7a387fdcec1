"""The error every schedule record raises when it is invalid."""

from __future__ import annotations

from typing import Any


class DefinitionError(ValueError):
    """A schedule definition is invalid; `field` names the attribute at fault."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field

    def __reduce__(self) -> tuple[Any, ...]:  # survive pickling (Celery results)
        return (type(self), (self.field, str(self)))
