"""LangGraph's matching rules, as pure functions: search filters and namespace conditions.

They follow `langgraph.store.memory.InMemoryStore` (the reference behaviour) with
two documented deviations that replace its crashes by a non-match:

- `$gt/$gte/$lt/$lte` compare numbers numerically and strings with strings
  (lexicographically). InMemoryStore calls ``float()`` on both sides and raises
  `TypeError`/`ValueError` for a missing field or a non-numeric string; here such
  an item simply does not match. (PostgresStore compares every value as text,
  so ``10 > 9`` is false there; numbers compare as numbers here.)
- An unknown operator raises ``ValueError("Unsupported operator: $op")`` exactly
  as InMemoryStore does.

Filter keys are top-level fields of the value. A filter value that is a mapping
without ``$`` operators matches a nested object field by field; a list matches
element-wise; anything else compares with ``==``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether an item's value satisfies every condition of a LangGraph search filter."""
    if not filter:
        return True
    return all(compare(value.get(field), wanted) for field, wanted in filter.items())


def check_filter(filter: Mapping[str, Any] | None) -> None:
    """Raise for an unsupported operator even when no item reaches the comparison."""
    if filter is not None and not isinstance(filter, Mapping):
        raise TypeError(
            f"filter must be a mapping of field to condition, got {type(filter).__name__}"
        )
    for wanted in (filter or {}).values():
        if isinstance(wanted, Mapping):
            for name in wanted:
                if str(name).startswith("$") and name not in OPERATORS:
                    raise ValueError(f"Unsupported operator: {name}")


def check_page(limit: int, offset: int, max_depth: int | None = None) -> None:
    """Refuse what a Python slice would silently misread (`[-2:]` is the last two).

    PostgresStore raises for these too, from PostgreSQL ("LIMIT must not be negative").
    """
    for name, number in (("limit", limit), ("offset", offset)):
        if number < 0:
            raise ValueError(f"{name} must be 0 or more, got {number}")
    if max_depth is not None and max_depth < 1:
        raise ValueError(f"max_depth must be 1 or more, got {max_depth}")


def compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(apply_operator(actual, op, operand) for op, operand in wanted.items())
        if not isinstance(actual, Mapping):
            return False
        return all(compare(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(wanted)
            and all(compare(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


def apply_operator(actual: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(actual == operand)
    if operator == "$ne":
        return bool(actual != operand)
    if operator not in OPERATORS:
        raise ValueError(f"Unsupported operator: {operator}")
    ordered = _orderable(actual, operand)
    if ordered is None:
        return False
    left, right = ordered
    if operator == "$gt":
        return bool(left > right)
    if operator == "$gte":
        return bool(left >= right)
    if operator == "$lt":
        return bool(left < right)
    return bool(left <= right)


def _orderable(actual: Any, operand: Any) -> tuple[Any, Any] | None:
    if _number(actual) and _number(operand):
        return float(actual), float(operand)
    if isinstance(actual, str) and isinstance(operand, str):
        return actual, operand
    return None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def in_prefix(namespace: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
    """Search scoping: the namespace equals `prefix` or lies below it (no wildcards)."""
    return namespace[: len(prefix)] == prefix


def matches_condition(match_type: str, path: Sequence[str], namespace: tuple[str, ...]) -> bool:
    """A list_namespaces condition: `path` at the start (prefix) or end (suffix), `*` = one label."""
    if len(namespace) < len(path):
        return False
    if match_type == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"Unsupported match type: {match_type}")
    return all(p == "*" or n == p for n, p in pairs)


def list_namespaces(
    namespaces: set[tuple[str, ...]],
    conditions: Sequence[tuple[str, Sequence[str]]],
    *,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> list[tuple[str, ...]]:
    """Namespaces meeting every condition, truncated to `max_depth`, de-duplicated, sorted."""
    kept = [n for n in namespaces if all(matches_condition(t, p, n) for t, p in conditions)]
    if max_depth is not None:
        kept = list({n[:max_depth] for n in kept})
    return sorted(kept)[offset : offset + limit]
