"""Statements whose SQL differs between PostgreSQL and SQLite, besides full text."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Boolean, ColumnElement, Connection, String, Table, any_, bindparam, exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import Select
from sqlalchemy.sql.functions import FunctionElement


def insert_ignoring_conflicts(
    conn: Connection, table: Table, rows: Sequence[dict[str, Any]], *, returning: str
) -> list[Any]:
    """Insert `rows`, silently skipping those that hit a unique constraint.

    Returns the `returning` column of the rows actually inserted, so a caller can
    tell "I created it" from "someone else already had".
    """
    if not rows:
        return []
    module: Any = postgresql if conn.dialect.name == "postgresql" else sqlite
    statement = module.insert(table).on_conflict_do_nothing().returning(table.c[returning])
    # executemany: SQLAlchemy batches it ("insertmanyvalues") and keeps RETURNING; a
    # single multi-VALUES statement would be re-compiled for every batch size.
    return list(conn.execute(statement, list(rows)).scalars())


def one_of(column: Any, name: str, dialect: str) -> ColumnElement[bool]:
    """`column` equals one of the values of the list parameter `name`.

    PostgreSQL: `= ANY(array)`, one parameter whatever the list's length, so the
    statement can be compiled once and run on the driver (`DriverStatement`).
    SQLite: SQLAlchemy's expanding `IN`.
    """
    if dialect == "postgresql":
        return column == any_(bindparam(name, type_=postgresql.ARRAY(String)))
    return column.in_(bindparam(name, expanding=True))


class holds(FunctionElement[bool]):
    """`holds(text, part)`: the SQL text `text` contains the SQL text `part`, compared
    character for character. Unlike `LIKE '%' || part || '%'`, nothing in `part` is a
    pattern: a "%" or "_" in it matches only itself. PostgreSQL: `strpos`, SQLite:
    `instr`."""

    type = Boolean()
    name = "holds"
    inherit_cache = True


@compiles(holds)
def _holds_sqlite(element: holds, compiler: Any, **kw: Any) -> str:
    text, part = (compiler.process(arg, **kw) for arg in element.clauses)
    return f"(instr({text}, {part}) > 0)"


@compiles(holds, "postgresql")
def _holds_postgresql(element: holds, compiler: Any, **kw: Any) -> str:
    text, part = (compiler.process(arg, **kw) for arg in element.clauses)
    return f"(strpos({text}, {part}) > 0)"


def on_postgres(conn: Connection, statements: Iterable[str]) -> None:
    """Run `statements` (DDL of functions SQLite does without) on PostgreSQL only."""
    if conn.dialect.name == "postgresql":
        for statement in statements:
            conn.exec_driver_sql(statement)


def array_literal(values: Iterable[str]) -> str:
    """`values` as the text of a PostgreSQL array (`{"a","b"}`), for a parameter cast
    in the statement (`%(ids)s::varchar[]`, or `%(at)s::timestamptz[]` with times as
    ISO text). psycopg2 sends a list as `ARRAY['a','b']`, one constant per element
    for the server to parse and coerce, and adapts it slowly on the way; one text
    is one constant. Measured on the writer's lookup (eight arrays of up to 50
    keys, empty table): 0.29 ms per round trip with lists, 0.11 ms with this."""
    items = list(values)
    if not items:
        return "{}"
    text = '","'.join(items)
    # Escape only a text that needs it (rare in keys and ids): more quotes than the
    # separators hold, or a backslash.
    if text.count('"') > 2 * (len(items) - 1) or "\\" in text:
        text = '","'.join(v.replace("\\", "\\\\").replace('"', '\\"') for v in items)
    return '{"' + text + '"}'


@dataclass(frozen=True, slots=True)
class DriverStatement:
    """A PostgreSQL statement compiled once to the driver's SQL, run without SQLAlchemy's
    per-call statement handling (cache lookup, parameter and result processing),
    and on an autocommit connection as a server-side prepared statement.

    For the statements of the hot paths (a run's load, the memory writer's one
    statement), where that handling and the server's parsing and planning cost
    about as much as running the statement. Parameters go
    to psycopg2 as they are, so datetimes must be aware; result values are the
    driver's (aware datetimes in the session's time zone).

    A prepared statement always runs its generic plan, planned once per
    connection: `SET LOCAL plan_cache_mode = force_generic_plan` travels in front
    of each EXECUTE, in the same message and so the same implicit transaction
    (nothing outlives it, which matters behind a pooler). Left to itself,
    PostgreSQL kept planning the load anew at every run: with its values known it
    estimates a cheaper plan than the generic one, but planning took longer than
    running either (at 1,000,000 memories the load statement took 0.88 ms re-planned
    and 0.64 ms with its generic plan, medians of 300).

    That is safe only for a statement whose best plan does not depend on its
    values: the load (rows of a few scopes, ranked) is one, and so is the writer's
    (rows from JSON, updates by primary key); a full-text *filter* (`@@`) is not —
    a common word makes its generic plan many times slower (`bench/memory_bench.py`
    measures both). Never prepare the latter.

    A generic plan is kept until the table's statistics change, and a table that
    was never analyzed is planned as ten pages: a plan cached on an empty table
    (a new deployment, the bench) scanned it whole for every apply, at 7,500 rows
    5 of the writer's 8 ms, until autovacuum's first ANALYZE. A statement that
    reaches its rows only by key says so (`by_key`): its plan is then made with
    sequential scans, hash and merge joins set aside, so it probes an index per
    row whatever the statistics say.
    """

    sql: str
    constants: Mapping[str, Any]
    name: str
    prepare: str
    execute_prepared: str

    @classmethod
    def compile(cls, statement: Select[Any]) -> DriverStatement:
        compiled = statement.compile(dialect=postgresql.psycopg2.dialect())
        constants = {
            name: value
            for name, value in compiled.construct_params(_check=False).items()
            if value is not None
        }
        return cls.from_sql(compiled.string, constants)

    @classmethod
    def from_sql(
        cls, sql: str, constants: Mapping[str, Any] | None = None, *, by_key: bool = False
    ) -> DriverStatement:
        """A statement written for the driver (`%(name)s` parameters). `by_key`: every
        row it reads or changes is found by an index's full key (see the class)."""
        constants = constants or {}
        names = list(dict.fromkeys(_PLACEHOLDER.findall(sql)))
        numbered = sql
        for i, name in enumerate(names, start=1):
            numbered = numbered.replace(f"%({name})s", f"${i}")
        digest = hashlib.sha256(sql.encode()).hexdigest()[:16]
        name = f"ns_{digest}"
        prepare = f"PREPARE {name} AS {numbered.replace('%%', '%')}"
        args = ", ".join(f"%({n})s" for n in names)
        settings = GENERIC_PLAN + (BY_KEY if by_key else "")
        execute = f"{settings} EXECUTE {name}({args})"
        return cls(sql, constants, name, prepare, execute)

    def execute(self, conn: Connection, params: Mapping[str, Any]) -> Any:
        """The result (iterable of tuples in select order), through `exec_driver_sql`
        so that errors and disconnects are still SQLAlchemy's to handle."""
        values = {**self.constants, **params}
        info = conn.connection.info
        if not conn.connection.dbapi_connection.autocommit or info.get("ns_plain"):  # type: ignore[union-attr]
            # Inside a transaction a failed EXECUTE would abort it: no preparing.
            return conn.exec_driver_sql(self.sql, values)
        prepared: set[str] = info.setdefault("ns_prepared", set())
        if self.name not in prepared:
            try:
                conn.exec_driver_sql(self.prepare)
            except exc.DBAPIError as error:
                # Already there: a pooler (pgbouncer, transaction mode) handed us a
                # server session another client prepared it on. Same name, same text.
                if getattr(error.orig, "pgcode", None) != "42P05":
                    raise
            prepared.add(self.name)
        try:
            return conn.exec_driver_sql(self.execute_prepared, values)
        except exc.DBAPIError as error:
            # Gone (DISCARD ALL, a pooler handing us another server session):
            # forget it, answer this call with the plain statement.
            if getattr(error.orig, "pgcode", None) != "26000":
                raise
            prepared.discard(self.name)
            # Lost twice on one connection: its server session changes under it (a
            # transaction-mode pooler), where preparing only adds round trips.
            # Plain statements on this connection from now on.
            info["ns_prepare_misses"] = misses = info.get("ns_prepare_misses", 0) + 1
            if misses >= PLAIN_AFTER_MISSES:
                info["ns_plain"] = True
            return conn.exec_driver_sql(self.sql, values)


PLAIN_AFTER_MISSES = 2

GENERIC_PLAN = "SET LOCAL plan_cache_mode = force_generic_plan;"
"""What precedes a prepared statement's EXECUTE (see `DriverStatement`)."""

BY_KEY = (
    " SET LOCAL enable_seqscan = off; SET LOCAL enable_hashjoin = off;"
    " SET LOCAL enable_mergejoin = off;"
)
"""What also precedes it for a statement that reaches its rows by key."""

_SETTINGS = re.compile(r"\s*(SET LOCAL [^;]*;\s*)*")


def sent_statement(sent: str) -> str:
    """The statement in the text sent to the server, without the settings in front."""
    match = _SETTINGS.match(sent)
    return sent[match.end() :] if match else sent


_PLACEHOLDER = re.compile(r"%\((\w+)\)s")
