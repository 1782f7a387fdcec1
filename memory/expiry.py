"""Expiry: memories unreinforced past their TTL, and time-bound facts past `valid_to`.

A TTL runs from `last_reinforced_at` (being loaded or searched never resets it;
an up-vote does). It is set per kind and per layer, 90 days by default, and must
lie between 7 and 180 days. `expired_clause` is the SQL test the loader uses, so
an expired memory stops being loaded the moment its time is up, before the
`expire` pass marks it; `purge` later deletes expired rows for good through the
forgetting path (with a tombstone).

    ttl = TtlConfig.parse("default=90;episode=30;private/fact=120")
    query.where(not_(expired_clause(now, ttl)))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    case,
    false,
    func,
    literal,
    or_,
    select,
    update,
)

from memory.records import Kind, Layer, Memory, Status
from memory.tables import Timestamp, memories

DEFAULT_TTL_DAYS = 90
DEFAULT_TTL_SPAN = timedelta(days=DEFAULT_TTL_DAYS)
"""Unreinforced this long, a memory is not loaded even before the expire job marks it.
Shorter per-kind or per-layer TTLs (NIGHTSHIFT_MEMORY_TTL) take effect when the
expire job runs (NIGHTSHIFT_EXPIRE_INTERVAL)."""
MIN_TTL_DAYS = 7
MAX_TTL_DAYS = 180


class TtlConfigError(ValueError):
    """A TTL setting is malformed or outside 7–180 days; the message names the entry."""


@dataclass(frozen=True, slots=True)
class TtlConfig:
    """TTL in days: a default, per kind, per layer, and per (layer, kind); most specific wins."""

    default_days: int = DEFAULT_TTL_DAYS
    by_kind: Mapping[Kind, int] = field(default_factory=dict)
    by_layer: Mapping[Layer, int] = field(default_factory=dict)
    by_layer_kind: Mapping[tuple[Layer, Kind], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        entries: list[tuple[str, int]] = [("default", self.default_days)]
        entries += [(k.value, d) for k, d in self.by_kind.items()]
        entries += [(layer.value, d) for layer, d in self.by_layer.items()]
        entries += [(f"{lr.value}/{k.value}", d) for (lr, k), d in self.by_layer_kind.items()]
        for name, days in entries:
            _check_days(name, days)

    def days(self, layer: Layer, kind: Kind) -> int:
        if (layer, kind) in self.by_layer_kind:
            return self.by_layer_kind[(layer, kind)]
        if kind in self.by_kind:
            return self.by_kind[kind]
        return self.by_layer.get(layer, self.default_days)

    @classmethod
    def parse(cls, spec: str) -> TtlConfig:
        """Parse `default=90;episode=30;private=60;shared/fact=120` (days; `;` or `,` apart)."""
        default = DEFAULT_TTL_DAYS
        by_kind: dict[Kind, int] = {}
        by_layer: dict[Layer, int] = {}
        by_layer_kind: dict[tuple[Layer, Kind], int] = {}
        for item in filter(None, (p.strip() for p in spec.replace(",", ";").split(";"))):
            name, sep, raw = item.partition("=")
            name = name.strip().lower()
            if not sep:
                raise TtlConfigError(f"TTL entry {item!r} is not name=days")
            try:
                days = int(raw.strip().removesuffix("d"))
            except ValueError:
                raise TtlConfigError(
                    f"TTL entry {item!r}: {raw.strip()!r} is not whole days"
                ) from None
            _check_days(name, days)
            if name == "default":
                default = days
            elif "/" in name:
                layer, _, kind = name.partition("/")
                by_layer_kind[(_layer(layer, item), _kind(kind, item))] = days
            elif name in Layer._value2member_map_:
                by_layer[Layer(name)] = days
            else:
                by_kind[_kind(name, item)] = days
        return cls(default, by_kind, by_layer, by_layer_kind)


def _check_days(name: str, days: int) -> None:
    if not MIN_TTL_DAYS <= days <= MAX_TTL_DAYS:
        raise TtlConfigError(
            f"TTL for {name!r} is {days} days; allowed is {MIN_TTL_DAYS}–{MAX_TTL_DAYS} days"
        )


def _kind(name: str, item: str) -> Kind:
    try:
        return Kind(name)
    except ValueError:
        known = ", ".join([*Kind._value2member_map_, *Layer._value2member_map_])
        raise TtlConfigError(f"TTL entry {item!r}: {name!r} is not one of {known}") from None


def _layer(name: str, item: str) -> Layer:
    try:
        return Layer(name)
    except ValueError:
        raise TtlConfigError(
            f"TTL entry {item!r}: {name!r} is not a layer ({', '.join(Layer._value2member_map_)})"
        ) from None


DEFAULT_TTL = TtlConfig()


def layer_clause(layer: Layer) -> ColumnElement[bool]:
    """Rows of `layer`, read from which scope columns are the wildcard."""
    user, agent = memories.c.user_id != "", memories.c.agent_id != ""
    return {
        Layer.PRIVATE: and_(user, agent),
        Layer.SHARED: and_(user, memories.c.agent_id == ""),
        Layer.AGENT: and_(memories.c.user_id == "", agent),
        Layer.TENANT: and_(memories.c.user_id == "", memories.c.agent_id == ""),
    }[layer]


def ttl_cutoff(now: datetime, ttl: TtlConfig) -> ColumnElement[datetime]:
    """Per row: the instant before which its last reinforcement makes it expired."""

    def at(days: int) -> ColumnElement[datetime]:
        return literal(now - timedelta(days=days), Timestamp())

    whens = [
        (and_(layer_clause(layer), memories.c.kind == kind.value), at(ttl.days(layer, kind)))
        for layer in Layer
        for kind in Kind
        if ttl.days(layer, kind) != ttl.default_days
    ]
    if not whens:
        return at(ttl.default_days)
    return case(*whens, else_=at(ttl.default_days))


def expired_clause(now: datetime, ttl: TtlConfig = DEFAULT_TTL) -> ColumnElement[bool]:
    """True for rows past `valid_to` or unreinforced for longer than their TTL."""
    return or_(
        and_(memories.c.valid_to.is_not(None), memories.c.valid_to <= now),
        memories.c.last_reinforced_at < ttl_cutoff(now, ttl),
    )


def is_expired(memory: Memory, now: datetime, ttl: TtlConfig = DEFAULT_TTL) -> bool:
    """The same test as `expired_clause`, for one record (the in-memory backend)."""
    if memory.valid_to is not None and memory.valid_to <= now:
        return True
    limit = timedelta(days=ttl.days(memory.scope.layer, memory.kind))
    return memory.last_reinforced_at < now - limit


def expire(
    conn: Connection,
    now: datetime,
    ttl: TtlConfig = DEFAULT_TTL,
    *,
    tenant: str | None = None,
    dry_run: bool = False,
) -> int:
    """Mark expired active memories `expired` (one UPDATE); return how many.

    `valid_to` is set to now for TTL expiry (kept for time-bound facts), so
    `purge` can tell how long a row has been expired.
    """
    where = and_(
        memories.c.status == Status.ACTIVE.value,
        expired_clause(now, ttl),
        memories.c.tenant == tenant if tenant is not None else literal(True),
    )
    if dry_run:
        return int(conn.execute(select(func.count()).where(where)).scalar_one())
    result = conn.execute(
        update(memories)
        .where(where)
        .values(
            status=Status.EXPIRED.value,
            valid_to=case(
                (
                    and_(memories.c.valid_to.is_not(None), memories.c.valid_to <= now),
                    memories.c.valid_to,
                ),
                else_=literal(now, Timestamp()),
            ),
            version=memories.c.version + 1,
        )
    )
    return int(result.rowcount or 0)


def purgeable_clause(now: datetime, purge_after: timedelta) -> ColumnElement[bool]:
    """Expired rows whose expiry lies more than `purge_after` in the past."""
    if purge_after < timedelta(0):
        return false()
    return and_(
        memories.c.status == Status.EXPIRED.value,
        memories.c.valid_to.is_not(None),
        memories.c.valid_to <= now - purge_after,
    )
