"""Agent attachment: which layers each agent reads and writes, from one settings file.

The file (`NIGHTSHIFT_AGENT_RULES`, TOML or JSON by extension) has one table per
agent and an optional `default` table for agents it does not name::

    [default]
    user_memory_from = ["private"]

    [agents.checker]            # reads, never writes
    writes = false

    [agents.scribe]             # writes without being influenced by memory
    reads = false
    write_layers = ["private", "shared"]

    [agents.announcer]
    read_layers = ["agent", "tenant"]
    write_layers = ["agent", "tenant"]
    user_memory_from = ["private", "shared"]
    inferred_bar = 0.6
    publish_from_user_runs = ["agent"]   # what it learns for one person, everyone gets

Fields: `reads`, `writes` (booleans), `read_layers`, `write_layers` (lists of
``private``/``shared``/``agent``/``tenant``), `user_memory_from` (list of trigger
origins whose runs may read the person's layers), `inferred_bar` (0–1),
`publish_from_user_runs` (list of ``agent``/``tenant``; default none). Anything
else is an error that names the file and the field.

`publish_from_user_runs` is the opt-in for a run acting for a person (a run with a
user) to write a layer other people read without review. By default what such a
run writes to the agent or tenant layer waits in the review queue (receipt rule
``cross-user-layer``) until an operator approves it: Ana's run must not put Ana's
diagnosis into Bob's runs. List a layer only for an agent whose every write there
is meant for everyone (an announcer, a runbook keeper); it must also be in
`write_layers`.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memory.policy import PUBLIC_LAYERS, AgentRules
from memory.records import Layer


class AttachmentError(ValueError):
    """The agent rules file cannot be used; the message names the file and the field."""


class _Rules(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    reads: bool = True
    writes: bool = True
    read_layers: list[Layer] = Field(default_factory=lambda: list(Layer))
    write_layers: list[Layer] = Field(
        default_factory=lambda: [Layer.PRIVATE, Layer.SHARED, Layer.AGENT]
    )
    user_memory_from: list[str] = Field(default_factory=lambda: ["private"])
    inferred_bar: float = Field(default=0.75, ge=0.0, le=1.0)
    publish_from_user_runs: list[Layer] = Field(default_factory=list)

    @field_validator("publish_from_user_runs")
    @classmethod
    def _read_by_others(cls, layers: list[Layer]) -> list[Layer]:
        if personal := [layer.value for layer in layers if layer not in PUBLIC_LAYERS]:
            raise ValueError(
                f"{', '.join(personal)} is a person's own layer; list only agent or tenant"
            )
        return layers

    def to_rules(self) -> AgentRules:
        return AgentRules(
            writes_enabled=self.writes,
            reads_enabled=self.reads,
            writable_layers=frozenset(self.write_layers),
            readable_layers=frozenset(self.read_layers),
            user_memory_from=frozenset(self.user_memory_from),
            inferred_bar=self.inferred_bar,
            publish_from_user_runs=frozenset(self.publish_from_user_runs),
        )


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    default: _Rules = Field(default_factory=_Rules)
    agents: dict[str, _Rules] = Field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Attachments:
    """Rules per agent, with a default for the rest. Call it like a `rules_for`."""

    default: AgentRules = field(default_factory=AgentRules.default)
    agents: Mapping[str, AgentRules] = field(default_factory=dict)

    def __call__(self, agent: str) -> AgentRules:
        return self.agents.get(agent, self.default)


def parse(data: Mapping[str, Any], *, where: str) -> Attachments:
    """Validate a decoded rules document; `where` (a file name) prefixes every error."""
    try:
        parsed = _File.model_validate(_strict_layers(data))
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors()
        )
        raise AttachmentError(f"{where}: {problems}") from None
    return Attachments(
        default=parsed.default.to_rules(),
        agents={name: rules.to_rules() for name, rules in parsed.agents.items()},
    )


def _strict_layers(data: Mapping[str, Any]) -> Any:
    """Layers arrive as strings; let strict mode accept exactly the enum's values."""

    def fix(rules: Any) -> Any:
        if not isinstance(rules, Mapping):
            return rules
        out = dict(rules)
        for name in ("read_layers", "write_layers", "publish_from_user_runs"):
            if isinstance(out.get(name), list):
                out[name] = [Layer(x) if x in set(Layer) else x for x in out[name]]
        return out

    if not isinstance(data, Mapping):
        return data
    out = dict(data)
    if "default" in out:
        out["default"] = fix(out["default"])
    if isinstance(out.get("agents"), Mapping):
        out["agents"] = {k: fix(v) for k, v in out["agents"].items()}
    return out


def load(path: str | Path) -> Attachments:
    """Read the rules file at `path` (``.toml`` or ``.json``)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise AttachmentError(
            f"{path}: cannot read the agent rules file ({error.strerror})"
        ) from None
    try:
        if path.suffix == ".json":
            data = json.loads(raw)
        elif path.suffix == ".toml":
            data = tomllib.loads(raw.decode())
        else:
            raise AttachmentError(f"{path}: agent rules must be a .toml or .json file")
    except (json.JSONDecodeError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise AttachmentError(f"{path}: not valid {path.suffix[1:].upper()}: {error}") from None
    return parse(data, where=str(path))


_cache: dict[str, tuple[float, Attachments]] = {}


def from_path(path: str) -> Attachments:
    """The attachments in `path` (every agent the default when `path` is empty).

    Re-read when the file changes, so an operator's edit takes effect without a
    restart; a broken edit raises `AttachmentError` rather than falling back.
    """
    if not path:
        return Attachments()
    try:
        mtime = Path(path).stat().st_mtime
    except OSError as error:
        raise AttachmentError(
            f"{path}: cannot read the agent rules file ({error.strerror})"
        ) from None
    cached = _cache.get(path)
    if cached is None or cached[0] != mtime:
        cached = (mtime, load(path))
        _cache[path] = cached
    return cached[1]
