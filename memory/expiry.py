"""Expiry: memories unreinforced past their TTL, and time-bound facts past `valid_to`.

A TTL runs from `last_reinforced_at` (being loaded or searched never resets it;
an up-vote does). It is set per kind and per layer, 90 days by default, and must
lie between 7 and 180 days. Every read of loadable memory (a run's load, search,
the LangGraph adapter, the in-memory backend) applies the store's TTLs itself
(`Store(ttl=…)`; NIGHTSHIFT_MEMORY_TTL in the workers and the CLI) — `within_ttl`
in SQL, `is_expired` for one record — so a memory stops being loaded the moment
its TTL runs out, before the `expire` pass marks it, and a longer TTL keeps it
loadable as long as it says; `purge` later deletes expired rows for good through
the forgetting path (with a tombstone).

    ttl = TtlConfig.parse("default=90;episode=30;private/fact=120")
    query.where(within_ttl(ttl, literal_cutoff(now)))   # or not_(expired_clause(now, ttl))
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    bindparam,
    case,
    false,
    func,
    literal,
    not_,
    or_,
    select,
    update,
)

from memory.records import Kind, Layer, Memory, Status
from memory.tables import ACTIVE_ROW, Timestamp, memories

DEFAULT_TTL_DAYS = 90
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
    # Derived once: a load hashes the configuration (its statements are cached by
    # it) and computes its cutoffs on every call.
    _table: tuple[tuple[Layer, Kind, int], ...] = field(init=False, repr=False, compare=False)
    _spans: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        entries: list[tuple[str, int]] = [("default", self.default_days)]
        entries += [(k.value, d) for k, d in self.by_kind.items()]
        entries += [(layer.value, d) for layer, d in self.by_layer.items()]
        entries += [(f"{lr.value}/{k.value}", d) for (lr, k), d in self.by_layer_kind.items()]
        for name, days in entries:
            _check_days(name, days)
        table = tuple((layer, kind, self.days(layer, kind)) for layer in Layer for kind in Kind)
        object.__setattr__(self, "_table", table)
        object.__setattr__(self, "_spans", tuple(sorted({days for _, _, days in table})))
        object.__setattr__(self, "_hash", hash(table))

    def __hash__(self) -> int:
        # Equal configurations have equal tables, so equal hashes.
        return self._hash

    def days(self, layer: Layer, kind: Kind) -> int:
        if (layer, kind) in self.by_layer_kind:
            return self.by_layer_kind[(layer, kind)]
        if kind in self.by_kind:
            return self.by_kind[kind]
        return self.by_layer.get(layer, self.default_days)

    def table(self) -> tuple[tuple[Layer, Kind, int], ...]:
        """The TTL of every (layer, kind), in enum order: the configuration's effect."""
        return self._table

    @property
    def spans(self) -> tuple[int, ...]:
        """The distinct TTLs in days, shortest first."""
        return self._spans

    @property
    def longest_days(self) -> int:
        """The longest TTL of any layer and kind: no row reinforced before it is loadable."""
        return self._spans[-1]

    @property
    def uniform(self) -> bool:
        """Every layer and kind has the same TTL (a default and nothing else that differs)."""
        return len(self.spans) == 1

    @classmethod
    def parse(cls, spec: str) -> TtlConfig:
        """Parse `default=90;episode=30;private=60;shared/fact=120` (days; `;` or `,` apart)."""
        default = DEFAULT_TTL_DAYS
        by_kind: dict[Kind, int] = {}
        by_layer: dict[Layer, int] = {}
        by_layer_kind: dict[tuple[Layer, Kind], int] = {}
        seen: set[str] = set()
        for item in filter(None, (p.strip() for p in spec.replace(",", ";").split(";"))):
            name, sep, raw = item.partition("=")
            name = name.strip().lower()
            if not sep:
                raise TtlConfigError(f"TTL entry {item!r} is not name=days")
            if name in seen:  # the later one silently won: `default=90;default=7` was 7
                raise TtlConfigError(f"TTL entry {item!r}: {name!r} is given twice; give it once")
            seen.add(name)
            number = raw.strip().removesuffix("d")
            # ASCII digits only: `int` also reads "٩٠" (Arabic-Indic) and " 9_0 " as 90.
            if not (number.isascii() and number.isdigit()):
                raise TtlConfigError(f"TTL entry {item!r}: {raw.strip()!r} is not whole days")
            days = int(number)
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


Cutoff = Callable[[int], ColumnElement[datetime]]
"""The instant `days` before now, as SQL: `literal_cutoff(now)` for a statement built
for one call, `cutoff_param` (with `cutoff_values` as parameters) for a cached one."""


def literal_cutoff(now: datetime) -> Cutoff:
    def at(days: int) -> ColumnElement[datetime]:
        return literal(now - timedelta(days=days), Timestamp())

    return at


def cutoff_param(days: int) -> ColumnElement[datetime]:
    """The cutoff `days` before now as the bound parameter `ttl_<days>d`."""
    return bindparam(f"ttl_{days}d", type_=Timestamp())


def cutoff_values(now: datetime, ttl: TtlConfig) -> dict[str, datetime]:
    """The values of the `cutoff_param` parameters a statement built for `ttl` uses."""
    return {f"ttl_{d}d": now - timedelta(days=d) for d in ttl.spans}


def within_ttl(ttl: TtlConfig, cutoff: Cutoff) -> ColumnElement[bool]:
    """Rows reinforced within their TTL: the one SQL form of the TTL rule.

    A range on `last_reinforced_at` at the longest TTL (what bounds an index scan on
    `ix_ns_memories_loadable`), and, only when TTLs differ by kind or layer, one
    clause per shorter TTL for the rows it applies to. No CASE: every cutoff is
    compared with the column directly, so a prepared statement types its
    parameters as timestamps. Exact on its own when the configuration is uniform.
    """
    longest = ttl.longest_days
    in_range = memories.c.last_reinforced_at >= cutoff(longest)
    if ttl.uniform:
        return in_range
    every = {(layer, kind) for layer, kind, _ in ttl.table()}
    by_days: dict[int, set[tuple[Layer, Kind]]] = {}
    for layer, kind, days in ttl.table():
        by_days.setdefault(days, set()).add((layer, kind))
    shorter: list[ColumnElement[bool]] = []
    for days, pairs in sorted(by_days.items()):
        if days == longest:
            continue
        others = every - pairs  # whichever of the two is shorter to write
        exempt = rows_of(others) if len(others) < len(pairs) else not_(rows_of(pairs))
        shorter.append(or_(exempt, memories.c.last_reinforced_at >= cutoff(days)))
    return and_(in_range, *shorter)


def rows_of(pairs: set[tuple[Layer, Kind]]) -> ColumnElement[bool]:
    """Rows whose (layer, kind) is one of `pairs`: a kind alone where every layer is in."""
    whole = [kind for kind in Kind if all((layer, kind) in pairs for layer in Layer)]
    arms: list[ColumnElement[bool]] = [memories.c.kind == kind.value for kind in whole]
    for layer in Layer:
        kinds = [k for k in Kind if (layer, k) in pairs and k not in whole]
        if kinds:
            arms.append(
                and_(layer_clause(layer), or_(*(memories.c.kind == k.value for k in kinds)))
            )
    return or_(*arms)


def expired_clause(now: datetime, ttl: TtlConfig = DEFAULT_TTL) -> ColumnElement[bool]:
    """True for rows past `valid_to` or unreinforced for longer than their TTL."""
    return or_(
        and_(memories.c.valid_to.is_not(None), memories.c.valid_to <= now),
        not_(within_ttl(ttl, literal_cutoff(now))),
    )


def is_expired(memory: Memory, now: datetime, ttl: TtlConfig = DEFAULT_TTL) -> bool:
    """The same test as `expired_clause`, for one record (the in-memory backend, the
    LangGraph adapter's reads)."""
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
    among: ColumnElement[bool] | None = None,
) -> int:
    """Mark expired active memories `expired` (one UPDATE); return how many.

    `valid_to` is set to now for TTL expiry (kept for time-bound facts), so
    `purge` can tell how long a row has been expired. `among` narrows the rows
    looked at (the LangGraph adapter expires the items it is about to put).
    """
    where = and_(
        ACTIVE_ROW,
        expired_clause(now, ttl),
        memories.c.tenant == tenant if tenant is not None else literal(True),
        among if among is not None else literal(True),
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
