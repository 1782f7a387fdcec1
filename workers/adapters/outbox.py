"""The outbox: how a command agent hands back candidates, votes, subagents and its outcome.

One JSON object per line in `$NIGHTSHIFT_OUTBOX` (`outbox.jsonl` in the sandbox).
Each line is validated on its own: a bad line is refused with its line number and
the reason, and the good lines still count (the run then ends `partial`).

    {"type": "remember", "content": "INC-7 is a duplicate of INC-3",
     "kind": "fact", "key": "incident.INC-7", "source": "observed",
     "reference": "memory/3f2a….md", "layer": "private", "evidence": "same stack trace"}
    {"type": "vote", "memory_id": "3f2a…", "direction": "up"}
    {"type": "spawn", "agent": "researcher", "name": "prices", "goal": "…", "payload": {}}
    {"type": "outcome", "summary": "triaged 3", "tried": "grep for INC-", "evidence": "…"}

- `remember`: `content` is required; `kind` one of fact · episode · goal ·
  preference · instruction (default fact); `source` observed or inferred (default
  inferred) — an agent cannot claim to be the person or the operator; `layer`
  private · shared · agent (default private). The writer's gate still decides.
- `vote`: `direction` up or down, for a memory id the run was given; a vote on
  any other id, or a down-vote on a `stated` or `operator` memory, is refused
  (`memory.vote_rights`) and the run ends `partial`.
- `spawn`: starts a subagent run (see `workers.subagents`).
- `outcome`: at most one; the last one wins. `summary` is the run's summary,
  `tried` and `evidence` its goal attempt.

Limits: `MAX_BYTES` per outbox, `MAX_LINE_BYTES` per line, `MAX_LINES` lines; past
them the rest is refused. The file is opened without following symlinks and must
be a regular file: the outbox is the only thing read from a sandbox after its run.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

OUTBOX_NAME = "outbox.jsonl"
MAX_BYTES = 1024 * 1024
MAX_LINE_BYTES = 16 * 1024
MAX_LINES = 1000


class _Line(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class RememberLine(_Line):
    type: Literal["remember"]
    content: str = Field(min_length=1, max_length=4000)
    kind: Literal["fact", "episode", "goal", "preference", "instruction"] = "fact"
    key: str = Field("", max_length=256)
    source: Literal["observed", "inferred"] = "inferred"
    reference: str = Field("", max_length=500)
    layer: Literal["private", "shared", "agent"] = "private"
    evidence: str = Field("", max_length=2000)


class VoteLine(_Line):
    type: Literal["vote"]
    memory_id: str = Field(min_length=1, max_length=64)
    direction: Literal["up", "down"]


class SpawnLine(_Line):
    type: Literal["spawn"]
    agent: str = Field(min_length=1, max_length=128)
    name: str = Field("", max_length=64, pattern=r"^[A-Za-z0-9._-]*$")
    goal: str = Field("", max_length=2000)
    payload: dict[str, Any] = Field(default_factory=dict)


class OutcomeLine(_Line):
    type: Literal["outcome"]
    summary: str = Field("", max_length=2000)
    tried: str = Field("", max_length=2000)
    evidence: str = Field("", max_length=2000)


OutboxLine = Annotated[
    RememberLine | VoteLine | SpawnLine | OutcomeLine, Field(discriminator="type")
]
_PARSER: TypeAdapter[OutboxLine] = TypeAdapter(OutboxLine)


@dataclass(frozen=True, slots=True)
class Outbox:
    """The valid lines, in order, and a message per refused line ("line 3: …")."""

    lines: Sequence[RememberLine | VoteLine | SpawnLine | OutcomeLine] = ()
    refused: Sequence[str] = field(default_factory=tuple)


def parse(raw: bytes) -> Outbox:
    """Validate an outbox line by line. Never raises for bad content."""
    lines: list[Any] = []
    refused: list[str] = []
    if len(raw) > MAX_BYTES:
        refused.append(f"outbox is larger than {MAX_BYTES} bytes; the rest was not read")
        raw = raw[:MAX_BYTES]
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        if len(lines) + len(refused) >= MAX_LINES:
            refused.append(f"line {number}: more than {MAX_LINES} lines; the rest was not read")
            break
        problem = _problem(line)
        if problem:
            refused.append(f"line {number}: {problem}")
            continue
        try:
            lines.append(_PARSER.validate_json(line))
        except ValidationError as error:
            refused.append(f"line {number}: {_describe(error)}")
    return Outbox(tuple(lines), tuple(refused))


def read(path: Path) -> Outbox:
    """Read the outbox at `path` (absent: empty) without following a symlink."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return Outbox()
    except OSError as error:
        return Outbox(refused=(f"outbox could not be opened ({error.strerror}); not read",))
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return Outbox(refused=("outbox is not a regular file; not read",))
        return parse(handle.read(MAX_BYTES + 1))


def _problem(line: bytes) -> str:
    if len(line) > MAX_LINE_BYTES:
        return f"longer than {MAX_LINE_BYTES} bytes"
    try:
        value = json.loads(line)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        return f"not JSON ({error.__class__.__name__}: {str(error)[:80]})"
    except RecursionError:
        return "not JSON (nested too deeply)"
    if not isinstance(value, dict):
        return f"a JSON object is expected, not {type(value).__name__}"
    if value.get("type") not in ("remember", "vote", "spawn", "outcome"):
        return "field 'type' must be one of remember, vote, spawn, outcome"
    return ""


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:3]:
        where = ".".join(str(p) for p in item["loc"][1:]) or "line"
        parts.append(f"field {where!r}: {item['msg']}")
    return "; ".join(parts)
