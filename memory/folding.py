"""Texts compared as a reader sees them, in SQL, alike on PostgreSQL and SQLite.

One name can be stored in many spellings that read the same: "Ana", "ana ",
"ＡＮＡ" (full width), "Ana" with a zero-width space in it, "Łukasz Żółw" composed
or decomposed (NFD). A forget that compares stored characters finds one of them,
and its verification, asking the same way, finds nothing left. `ns_fold(text)`
is the form they share: invisible characters removed (`phrasing.INVISIBLE`),
compatibility forms folded (NFKC, which also composes NFD), each run of white
space made one space, the ends trimmed, lower-cased.

`ns_unconfuse(text)` is what a forget compares: the folded form with the letters of
other scripts that pass for Latin ones read as those (`phrasing.CONFUSABLES`, the
secret detector's second reading): "Аna Petrova" with a Cyrillic А, or a Greek Α,
is "ana petrova". Only a forget reads text so; stored text and keys keep their
letters ("Анна" stays Cyrillic, and only its look-alike "А" is read as "a", on
both sides of a comparison alike).

`ns_unaccent(text)` goes one step further for a forget's verification: that form
without accents or strokes ("Łukasz Żółw" and full-width "Ｌｕｋａｓｚ Zolw"
are both "lukasz zolw"). A forget does not delete by it — "Lukasz" may be another
person — but does not call itself exhaustive while such a spelling remains.

Both run in the database, so a forget compares rows where they are instead of
reading a tenant's rows into Python: SQLite calls `folded`, `unconfused` and
`unaccented` (registered on every connection by `memory.engine`), PostgreSQL SQL functions
of the same meaning built from `normalize`, `regexp_replace`, `translate` and
`lower` (migrations 0011 and 0018, and `create_all`). A query folds both sides of a comparison in the database, so
where the two dialects disagree on a rare letter (PostgreSQL lowers "İ" to "i",
Python to "i̇") each still agrees with itself.

    select(memories.c.id).where(fold(memories.c.subject) == fold(literal("Ana ")))

A memory's key is matched in the same folded form (`folded_key`), so "diet",
"Diet ", "DIET" and "diet" with a zero-width space are one slot: one active value,
superseded by a new one, and a person's statement on it not replaced by an agent's
inference. That form is computed here, in Python, and stored beside the key
(`ns_memories.key_folded`, see `memory.tables`), never by `ns_fold` in the
database: a key matched through an index must be folded the same way by every
writer, and the two dialects' `lower` differ on a rare letter.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable
from typing import Any

from sqlalchemy import ColumnElement, Connection, Text, func

from memory.dialect import on_postgres
from memory.phrasing import CONFUSABLES, INVISIBLE, as_read

SPACES = re.compile("[\t\n\v\f\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")
"""A run of white space, as literal characters both Python and PostgreSQL read (their
`\\s` differ: Python's also takes the ASCII separators \\x1c-\\x1f)."""

MARKS = re.compile("[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
"""Combining accents and diacritics: what NFKD splits off "ó" or "ż"."""
_STROKED, _PLAIN = "łøđħıŧ", "lodhit"
"""Lower-case letters with a stroke (or without a dot) that no decomposition undoes."""
_UNSTROKE = str.maketrans(_STROKED, _PLAIN)

_LOOK_ALIKES = "".join(map(chr, CONFUSABLES))
_LATIN = "".join(map(chr, CONFUSABLES.values()))
_SPELLED_SQL = (
    f"btrim(regexp_replace(normalize(regexp_replace(value, '{INVISIBLE.pattern}', '', 'g'), NFKC),"
    f" '{SPACES.pattern}', ' ', 'g'), ' ')"
)
"""`spelled` in SQL."""

POSTGRES_DDL = (
    "CREATE OR REPLACE FUNCTION ns_fold(value text) RETURNS text"
    f" LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT lower({_SPELLED_SQL}) $$",
    "CREATE OR REPLACE FUNCTION ns_unconfuse(value text) RETURNS text"
    " LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT lower(translate("
    f"{_SPELLED_SQL}, '{_LOOK_ALIKES}', '{_LATIN}')) $$",
    "CREATE OR REPLACE FUNCTION ns_unaccent(value text) RETURNS text"
    " LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$ SELECT translate(regexp_replace("
    f"normalize(ns_unconfuse(value), NFKD), '{MARKS.pattern}', '', 'g'), '{_STROKED}',"
    f" '{_PLAIN}') $$",
)
"""`folded`, `unconfused` and `unaccented` in SQL: plain SQL functions, so the planner
inlines them. `ns_unaccent` calls `ns_unconfuse`, so it is created after it."""
POSTGRES_DROP = (
    "DROP FUNCTION IF EXISTS ns_unaccent(text)",
    "DROP FUNCTION IF EXISTS ns_unconfuse(text)",
    "DROP FUNCTION IF EXISTS ns_fold(text)",
)


def spelled(text: str) -> str:
    """`text` in the one spelling of what a reader sees (`phrasing.as_read`, white
    space runs made one space, ends trimmed), case kept. How a subject is stored."""
    return SPACES.sub(" ", as_read(text)).strip(" ")


def folded(text: str) -> str:
    """`spelled(text)` lower-cased: what `ns_fold` makes of `text` on SQLite."""
    return spelled(text).lower()


ITEM_KEY_PREFIXES = ("lg:", "lg#")
"""The key families of the LangGraph adapter (`memory.langgraph.encoding`). An item key
is already one spelling per item (percent-encoded, or a hash), and LangGraph keys
are case sensitive: "Prefs" and "prefs" are two items. Such keys match as written."""


@functools.lru_cache(maxsize=4096)
def folded_key(key: str) -> str:
    """The form a memory key is matched in: `folded(key)`, or `key` itself for an
    adapter's item key (`ITEM_KEY_PREFIXES`). Stored as `ns_memories.key_folded`;
    every lookup by key (supersession, review, history, the goal record,
    consolidation) compares it. The key shown stays as its writer spelled it.

        >>> folded_key("Diet\u200b "), folded_key("ＤＩＥＴ"), folded_key("lg:ns:Prefs")
        ('diet', 'diet', 'lg:ns:Prefs')

    Cached: a writer meets the same few keys again and again."""
    return key if key.startswith(ITEM_KEY_PREFIXES) else folded(key)


def unconfused(text: str) -> str:
    """`spelled(text)` with look-alike letters of other scripts read as the Latin ones
    they pass for (`phrasing.CONFUSABLES`), then lower-cased (in that order: a
    Cyrillic "Н" looks like "H", its "н" like no Latin letter): what `ns_unconfuse` makes of
    `text` on SQLite. "Аna Petrova" with a Cyrillic А is "ana petrova"."""
    return spelled(text).translate(CONFUSABLES).lower()


def unaccented(text: str) -> str:
    """`unconfused(text)` without accents and strokes: what `ns_unaccent` makes of
    `text` on SQLite. "Łukasz Żółw" is "lukasz zolw"."""
    return MARKS.sub("", unicodedata.normalize("NFKD", unconfused(text))).translate(_UNSTROKE)


def fold(expression: Any) -> ColumnElement[str]:
    """`ns_fold(expression)`: an SQL text folded as `folded` folds it."""
    return func.ns_fold(expression, type_=Text)


def unconfuse(expression: Any) -> ColumnElement[str]:
    """`ns_unconfuse(expression)`: an SQL text as `unconfused` makes it."""
    return func.ns_unconfuse(expression, type_=Text)


def unaccent(expression: Any) -> ColumnElement[str]:
    """`ns_unaccent(expression)`: an SQL text as `unaccented` makes it."""
    return func.ns_unaccent(expression, type_=Text)


def register_sqlite(dbapi_connection: Any) -> None:
    """Make `ns_fold`, `ns_unconfuse` and `ns_unaccent` callable on a new SQLite connection."""
    functions = (("ns_fold", folded), ("ns_unconfuse", unconfused), ("ns_unaccent", unaccented))
    for name, python in functions:
        dbapi_connection.create_function(name, 1, _or_null(python), deterministic=True)


def create(conn: Connection) -> None:
    """PostgreSQL only: create the functions (a no-op on SQLite, where they are registered)."""
    on_postgres(conn, POSTGRES_DDL)


def drop(conn: Connection) -> None:
    on_postgres(conn, POSTGRES_DROP)


def _or_null(python: Callable[[str], str]) -> Callable[[object], object]:
    def call(value: object) -> object:
        return python(value) if isinstance(value, str) else value

    return call
