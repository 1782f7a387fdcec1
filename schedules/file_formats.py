"""Reading schedule files: TOML and YAML, with the line where each schedule and field starts.

Neither parser reports line numbers for values, so each format is read twice:
once by its parser for the data, once line by line (TOML) or by node (YAML) for
where things are, so an error can say `file:line`. YAML is read safely, refuses
duplicate keys, and is bounded in nodes; a file is bounded in bytes.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MAX_FILE_BYTES = 16 * 1024 * 1024


@dataclass(slots=True)
class RawSchedule:
    """One schedule's raw data with where it and its fields start (1-based)."""

    data: Any
    line: int | None
    field_lines: dict[str, int] = field(default_factory=dict)
    problem: tuple[str | None, str] | None = None  # found while reading (YAML)


class FileProblem(Exception):
    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


_TOML_TABLE = re.compile(r"^\s*\[\[?\s*schedule\s*\]\]?\s*(#.*)?$")
_TOML_SUBTABLE = re.compile(r"^\s*\[\[?\s*schedule\s*\.\s*\"?([A-Za-z0-9_-]+)")
_TOML_HEADER = re.compile(r"^\s*\[")
_TOML_KEY = re.compile(r"^\s*[\"']?([A-Za-z0-9_-]+)[\"']?\s*[=.]")


def _read_toml(text: str) -> list[RawSchedule]:
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = re.search(r"at line (\d+)", str(exc))
        line = int(match.group(1)) if match else len(text.splitlines()) or 1
        reason = re.sub(r" \(at [^)]*\)$", "", str(exc))
        raise FileProblem(line, f"TOML syntax error: {reason}") from None
    lines = text.splitlines()
    unknown = sorted(set(document) - {"schedule"})
    if unknown:
        where = next((i + 1 for i, t in enumerate(lines) if _TOML_KEY.match(t)), None)
        raise FileProblem(
            where, f"unknown top-level key {unknown[0]!r}; schedules go in [[schedule]] tables"
        )
    entries = document.get("schedule", [])
    if isinstance(entries, dict):
        entries = [entries]
    if not isinstance(entries, list):
        raise FileProblem(None, "'schedule' must be an array of tables: write [[schedule]]")
    return [
        RawSchedule(data, line, fields)
        for data, (line, fields) in zip(entries, _toml_lines(lines, len(entries)), strict=True)
    ]


def _toml_lines(lines: list[str], count: int) -> list[tuple[int | None, dict[str, int]]]:
    """Where each `[[schedule]]` table and its keys are: tomllib keeps no positions."""
    starts = [i for i, text in enumerate(lines) if _TOML_TABLE.match(text)]
    if len(starts) != count:  # written some other way (inline tables); no lines
        return [(None, {}) for _ in range(count)]
    located: list[tuple[int | None, dict[str, int]]] = []
    for n, first in enumerate(starts):
        stop = starts[n + 1] if n + 1 < len(starts) else len(lines)
        fields: dict[str, int] = {}
        in_subtable = False
        for i in range(first + 1, stop):
            if sub := _TOML_SUBTABLE.match(lines[i]):
                fields.setdefault(sub.group(1), i + 1)
                in_subtable = True
            elif _TOML_HEADER.match(lines[i]):
                in_subtable = True
            elif not in_subtable and (key := _TOML_KEY.match(lines[i])):
                fields.setdefault(key.group(1), i + 1)
        located.append((first + 1, fields))
    return located


def _read_yaml(text: str) -> list[RawSchedule]:
    loader = yaml.SafeLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return []
        if _node_count_exceeds(root, len(text) + 1_000):
            raise FileProblem(None, "YAML aliases expand to too much data")
        data = loader.construct_document(root)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        hint = _unquoted_hint(text.splitlines()[mark.line] if mark is not None else "")
        raise FileProblem(line, f"YAML syntax error: {exc.problem or exc.context}{hint}") from None
    except (yaml.YAMLError, ValueError, TypeError) as exc:
        raise FileProblem(None, f"YAML error: {exc}") from None
    finally:
        loader.dispose()
    if isinstance(root, yaml.MappingNode) and isinstance(data, dict) and "schedules" in data:
        unknown = sorted(str(key) for key in data if key != "schedules")
        if unknown:
            raise FileProblem(
                _key_lines(root).get(unknown[0]),
                f"unknown top-level key {unknown[0]!r}; schedules go in the 'schedules:' list",
            )
        root = next(value for key, value in root.value if key.value == "schedules")
        data = data["schedules"] or []
        if not isinstance(data, list):
            raise FileProblem(root.start_mark.line + 1, "'schedules' must be a list")
    if isinstance(data, dict):
        return [_yaml_entry(data, root)]
    if isinstance(data, list) and isinstance(root, yaml.SequenceNode):
        return [_yaml_entry(item, node) for item, node in zip(data, root.value, strict=True)]
    raise FileProblem(1, "expected a 'schedules:' list or one schedule mapping")


_UNQUOTED = re.compile(r"^\s*(?:-\s+)?([A-Za-z_][\w-]*)\s*:\s+([*@])")


def _unquoted_hint(line: str) -> str:
    """`cron: */5 * * * *` reads as a YAML alias (`*`) or a reserved `@`: say what to do."""
    match = _UNQUOTED.match(line)
    if match is None:
        return ""
    if match.group(1) == "cron":
        return '; quote the cron expression, e.g. cron: "*/5 * * * *"'
    return f"; quote the value of {match.group(1)!r}: YAML reads an unquoted {match.group(2)!r} specially"


def _yaml_entry(data: Any, node: yaml.Node) -> RawSchedule:
    raw = RawSchedule(data, node.start_mark.line + 1, _key_lines(node))
    duplicate = _duplicate_key(node)
    if duplicate is not None:
        key, first, again = duplicate
        raw.problem = (key, f"key {key!r} given twice (lines {first} and {again})")
    return raw


def _key_lines(node: yaml.Node) -> dict[str, int]:
    lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key, _ in node.value:
            if isinstance(key, yaml.ScalarNode):
                lines.setdefault(str(key.value), key.start_mark.line + 1)
    return lines


def _duplicate_key(node: yaml.Node) -> tuple[str, int, int] | None:
    """PyYAML silently keeps the last of two equal keys; we refuse them."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)
        elif isinstance(current, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key, value in current.value:
                if isinstance(key, yaml.ScalarNode) and key.value != "<<":
                    line = key.start_mark.line + 1
                    if key.value in seen:
                        return str(key.value), seen[key.value], line
                    seen[key.value] = line
                stack.append(value)
    return None


def _node_count_exceeds(root: yaml.Node, limit: int) -> bool:
    """True for alias bombs: a shared node is counted each time it is referenced."""
    stack, count = [root], 0
    while stack:
        node = stack.pop()
        count += 1
        if count > limit:
            return True
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                stack.extend((key, value))
    return False


def read_schedules(path: Path) -> list[RawSchedule]:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise FileProblem(None, f"file is larger than {MAX_FILE_BYTES // 2**20} MiB")
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileProblem(None, f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except OSError as exc:
        raise FileProblem(None, f"cannot read: {exc.strerror or exc}") from None
    try:
        return _read_toml(text) if path.suffix.lower() == ".toml" else _read_yaml(text)
    except RecursionError:
        raise FileProblem(None, "nested too deeply") from None
