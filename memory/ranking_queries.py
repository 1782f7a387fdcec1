"""The statements a run's load sends: the ranking pool, and both pools (hot and
cold) in one scan. They are the hot path of every run, so each is built once per
shape and cached, with everything else a bound parameter; on PostgreSQL the load
is a prepared statement run on the driver (`memory.dialect.DriverStatement`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Select,
    and_,
    bindparam,
    case,
    func,
    literal,
    literal_column,
    or_,
    select,
)

from memory import fulltext, lookups
from memory.dialect import DriverStatement, one_of
from memory.expiry import DEFAULT_TTL, TtlConfig, cutoff_param, cutoff_values, within_ttl
from memory.loading import Ranked
from memory.queries import ROW, ScopeOrScopes, readable_params, scope_params
from memory.records import KINDS, Kind, Memory, Scope
from memory.tables import ACTIVE_ROW, memories, utc


def ranking_pool(
    conn: Connection,
    scope: ScopeOrScopes,
    words: Sequence[str],
    now: datetime,
    *,
    min_score: float,
    kinds: Sequence[Kind],
    pool: int,
    ttl: TtlConfig = DEFAULT_TTL,
) -> list[tuple[Ranked, float]]:
    """Loadable memories readable by `scope`, most relevant first, then most recent.

    The statement is cached per shape (dialect, number of scopes, words or not, TTL
    configuration) and everything else is a bound parameter: loading runs at the
    start of every run, and building and compiling the SQL would cost more than
    executing it.
    """
    scopes = list(scope.readable() if isinstance(scope, Scope) else scope)
    if not scopes:
        return []
    statement = _pool_statement(conn.dialect.name, len(scopes), bool(words), ttl)
    params: dict[str, Any] = {
        "now": now,
        **cutoff_values(now, ttl),
        "min_score": min_score,
        "kinds": [k.value for k in kinds],
        "limit": pool,
    }
    params.update(scope_params(scopes))
    if words:
        params["match"] = fulltext.match_text(list(words), conn.dialect.name)
    return [
        (Ranked(r[0], KINDS[r[1]], r[2], r[3], r[4], r[5]), float(r[6]))
        for r in conn.execute(statement, params)
    ]


def load_pools(
    conn: Connection,
    scopes: Sequence[Scope],
    words: Sequence[str],
    now: datetime,
    *,
    min_score: float,
    hot: tuple[Sequence[Kind], int],
    cold: tuple[Sequence[Kind], int],
    ttl: TtlConfig = DEFAULT_TTL,
) -> tuple[list[tuple[Ranked, float]], list[tuple[Ranked, float]], dict[str, Any]]:
    """The hot and the cold ranking pools of a load in one round trip, and every
    pool row in full by id (for `Memory.from_row`), so the winners need no second
    query.

    A load used to fetch the pools light, then the winners by id: two round trips,
    the larger part of a load's time. The pools are bounded (`hot` and `cold`
    limits), so carrying whole rows costs a few kilobytes; only the winners are
    ever made into `Memory` objects.
    """
    if not scopes:
        return [], [], {}
    dialect = conn.dialect.name
    now = utc(now)
    params: dict[str, Any] = {
        "now": now,
        **cutoff_values(now, ttl),
        "min_score": min_score,
        "hot_kinds": [k.value for k in hot[0]],
        "hot_limit": hot[1],
        "cold_kinds": [k.value for k in cold[0]],
        "cold_limit": cold[1],
        **scope_params(scopes),
    }
    if words:
        params["match"] = fulltext.match_text(list(words), dialect)
    if dialect == "postgresql":
        result = _load_driver_statement(len(scopes), bool(words), ttl).execute(conn, params)
    else:
        result = conn.execute(_load_statement(dialect, len(scopes), bool(words), ttl), params)
    pools: tuple[list[tuple[Ranked, float]], list[tuple[Ranked, float]]] = ([], [])
    rows: dict[str, Any] = {}
    names = list(result.keys())
    at = {name: names.index(name) for name in _RANKED_COLUMNS}
    i_id, i_kind, i_content, i_conf, i_score, i_last, i_rel, i_pool = at.values()
    for r in result:
        ranked = Ranked(r[i_id], KINDS[r[i_kind]], r[i_content], r[i_conf], r[i_score], r[i_last])
        pools[r[i_pool]].append((ranked, float(r[i_rel])))
        rows[ranked.id] = (names, r)
    return pools[0], pools[1], rows


_RANKED_COLUMNS = (
    "id",
    "kind",
    "content",
    "confidence",
    "score",
    "last_reinforced_at",
    "relevance",
    "pool",
)


def memory_from_pool_row(row: tuple[list[str], Sequence[Any]]) -> Memory:
    """A pool row of `load_pools` (column names, values) as a `Memory`, its times in
    UTC like every read's (on PostgreSQL the pool is read on the driver, in the
    session's time zone)."""
    return lookups.driver_memory(*row)


@functools.lru_cache(maxsize=16)
def _load_driver_statement(scopes: int, words: bool, ttl: TtlConfig) -> DriverStatement:
    return DriverStatement.compile(_load_statement("postgresql", scopes, words, ttl))


@functools.lru_cache(maxsize=16)
def _load_statement(dialect: str, scopes: int, words: bool, ttl: TtlConfig) -> Any:
    """Both pools in one scan: number the rows within hot and within cold by rank
    order, keep the first `hot_limit` and `cold_limit` of each.

    The TTL configuration is part of the statement (fixed per process, so compiled
    once); its cutoffs are parameters (`expiry.cutoff_values`)."""
    hot = one_of(memories.c.kind, "hot_kinds", dialect)
    # Constants as SQL literals, not parameters: the PostgreSQL statement is
    # prepared, and an untyped parameter would come back as text.
    zero: ColumnElement[int] = literal_column("0")
    one: ColumnElement[int] = literal_column("1")
    pool = case((hot, zero), else_=one)
    query = select(*ROW).where(
        readable_params(scopes),
        ACTIVE_ROW,
        or_(memories.c.valid_to.is_(None), memories.c.valid_to > bindparam("now")),
        within_ttl(ttl, cutoff_param),
        memories.c.score >= bindparam("min_score"),
        or_(hot, one_of(memories.c.kind, "cold_kinds", dialect)),
    )
    if words:
        query = fulltext.with_relevance_param(query, dialect)
    else:
        query = query.add_columns(literal_column("0.0").label("relevance"))
    relevance = query.selected_columns.relevance
    numbered = query.add_columns(
        pool.label("pool"),
        func.row_number()
        .over(
            partition_by=pool,
            order_by=(relevance.desc(), memories.c.last_reinforced_at.desc(), memories.c.id),
        )
        .label("rn"),
    ).subquery("ranked")
    return select(*numbered.c).where(
        or_(
            and_(numbered.c.pool == zero, numbered.c.rn <= bindparam("hot_limit")),
            and_(numbered.c.pool == one, numbered.c.rn <= bindparam("cold_limit")),
        )
    )


@functools.lru_cache(maxsize=32)
def _pool_statement(
    dialect: str, scopes: int, words: bool, ttl: TtlConfig, pool: str = ""
) -> Select[Any]:
    readable = readable_params(scopes)
    light = (
        memories.c.id,
        memories.c.kind,
        memories.c.content,
        memories.c.confidence,
        memories.c.score,
        memories.c.last_reinforced_at,
    )
    query = select(*light).where(
        readable,
        ACTIVE_ROW,
        or_(memories.c.valid_to.is_(None), memories.c.valid_to > bindparam("now")),
        within_ttl(ttl, cutoff_param),
        memories.c.score >= bindparam("min_score"),
        memories.c.kind.in_(bindparam(f"{pool}kinds", expanding=True)),
    )
    if words:
        query = fulltext.with_relevance_param(query, dialect)
    else:
        query = query.add_columns(literal(0.0).label("relevance"))
    return query.order_by(
        fulltext.relevance_order(), memories.c.last_reinforced_at.desc(), memories.c.id
    ).limit(bindparam(f"{pool}limit"))
