"""Watching the SQL the store sends: which statements (`Statements`) and with which
plans (`Plans`), from any engine while a `with` block runs. Any engine: reads on
PostgreSQL go through the engine's autocommit sibling (`memory.engine.autocommit`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, event

from memory.dialect import sent_statement as _statement


class Statements:
    """The SQL statements sent in the `with` block, first word only (SELECT, WITH,
    INSERT …)."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __enter__(self) -> Statements:
        event.listen(Engine, "before_cursor_execute", self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(Engine, "before_cursor_execute", self._record)

    def _record(self, conn: object, cursor: object, statement: str, *args: object) -> None:
        self.seen.append(_statement(statement).split(None, 1)[0].upper())


class Plans:
    """The plan of every read run in the `with` block, explained on the same
    connection right after it ran (PostgreSQL: generic plan forced, sequential scans
    off, so an index the statement cannot use shows up as another one)."""

    def __init__(self) -> None:
        self.plans: list[tuple[str, str]] = []
        self._busy = False

    def __enter__(self) -> Plans:
        event.listen(Engine, "after_cursor_execute", self._explain)
        return self

    def __exit__(self, *exc: object) -> None:
        event.remove(Engine, "after_cursor_execute", self._explain)

    def _explain(self, conn: Any, cursor: Any, sent: str, parameters: Any, *_: Any) -> None:
        statement = _statement(sent)
        if self._busy or not statement.upper().startswith(("SELECT", "EXECUTE")):
            return
        self._busy = True
        own = conn.connection.dbapi_connection.cursor()
        try:
            if conn.dialect.name == "postgresql":
                own.execute("SET plan_cache_mode = force_generic_plan; SET enable_seqscan = off")
                own.execute("EXPLAIN " + statement, parameters)
                plan = "\n".join(row[0] for row in own.fetchall())
                own.execute("RESET plan_cache_mode; RESET enable_seqscan")
            else:
                own.execute("EXPLAIN QUERY PLAN " + statement, parameters)
                plan = "\n".join(str(row[-1]) for row in own.fetchall())
        finally:
            own.close()
            self._busy = False
        self.plans.append((statement, plan))

    def using(self, index: str) -> list[str]:
        return [statement for statement, plan in self.plans if index in plan]
