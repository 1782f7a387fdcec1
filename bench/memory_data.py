"""Data for the memory benchmark: reproducible memories, fresh databases, COPY loaders.

Content is drawn from a Zipf-like vocabulary so that a few words are common (the
top word is in about half the rows) and most are rare, like real notes; `RARE`
words are planted in one row in ten thousand.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import psycopg
from sqlalchemy.engine import make_url

from memory.records import Candidate, Kind, Provenance, Scope, Source, content_hash

COMMON = ["customer", "invoice", "server"]
RARE = ["zanzibar", "quokka", "xylophone"]
_WORDS = [f"w{i}" for i in range(4000)]
_KINDS = [Kind.FACT] * 8 + [Kind.EPISODE, Kind.PREFERENCE]
COLUMNS = [
    "id",
    "tenant",
    "user_id",
    "agent_id",
    "kind",
    "key",
    "key_folded",
    "content",
    "content_hash",
    "status",
    "source",
    "confidence",
    "reference",
    "run_id",
    "task_id",
    "agent",
    "subagent",
    "schedule",
    "subject",
    "idempotency_key",
    "version",
    "score",
    "created_at",
    "valid_from",
    "last_reinforced_at",
]


def scope_of(i: int) -> Scope:
    """Scope number `i`: 100 tenants of 100 users each, with one agent."""
    return Scope(f"t{i // 100}", f"u{i % 100}", "assistant")


def sentence(rng: random.Random) -> str:
    words = rng.choices(_WORDS, weights=_ZIPF, k=rng.randint(8, 14))
    if rng.random() < 0.5:
        words[rng.randrange(len(words))] = COMMON[0]
    if rng.random() < 0.2:
        words.append(COMMON[1 + rng.randrange(2)])
    if rng.random() < 0.0001:
        words.append(rng.choice(RARE))
    return " ".join(words)


_ZIPF = [1.0 / (rank + 1) for rank in range(len(_WORDS))]


def candidates(count: int, scopes: int, batch: int = 50, seed: int = 7) -> list[Candidate]:
    """What runs submit: each batch of `batch` from one run in one scope; facts and
    episodes, a quarter of them in slots that repeat across runs (supersession)."""
    rng = random.Random(seed)
    out = []
    for n in range(count):
        key = f"slot.{rng.randrange(20)}" if rng.random() < 0.25 else ""
        out.append(
            Candidate(
                scope=scope_of((n // batch) % scopes),
                kind=rng.choice([Kind.FACT, Kind.FACT, Kind.EPISODE]),
                content=sentence(rng),
                key=key,
                provenance=Provenance(
                    Source.OBSERVED, reference=f"feed#{n}", task_id=f"run-{n}", agent="assistant"
                ),
            )
        )
    return out


def rows(count: int, scopes: int, seed: int = 11) -> Iterator[tuple[object, ...]]:
    """`count` memory rows spread evenly over `scopes` scopes, in COLUMNS order."""
    rng = random.Random(seed)
    # Spread evenly over the 500,000 minutes (~347 days) up to today, so about a
    # quarter of every scope is within the default 90-day TTL, whatever the size and
    # whatever day the bench runs on.
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    for n in range(count):
        scope = scope_of(n % scopes)
        content = sentence(rng)
        at = today - timedelta(minutes=500_000 * (count - n) // count)
        yield (
            str(uuid.UUID(int=rng.getrandbits(128))),
            scope.tenant,
            scope.user,
            scope.agent,
            rng.choice(_KINDS).value,
            "",  # key
            "",  # key_folded
            content,
            content_hash(content),
            "active",
            "observed",
            0.8,
            f"feed#{n}",
            f"run-{n}",
            f"run-{n}",
            "assistant",
            "",
            "",
            "",
            f"run-{n}:{n}",
            1,
            1.0,
            at,
            at,
            at,
        )


def langgraph_row(row: Sequence[object]) -> tuple[object, ...]:
    """The same memory as a LangGraph store item: namespace, key, JSON value, times."""
    value = dict(zip(COLUMNS, row, strict=True))
    prefix = ".".join(str(value[c]) for c in ("tenant", "user_id", "agent_id"))
    body = {k: v for k, v in value.items() if k not in ("created_at", "valid_from", "key_folded")}
    body["last_reinforced_at"] = str(body["last_reinforced_at"])
    return (prefix, value["id"], json.dumps(body), value["created_at"], value["created_at"])


def copy_memories(url: str, data: Iterator[tuple[object, ...]]) -> int:
    with psycopg.connect(_libpq(url)) as conn, conn.cursor() as cur:
        with cur.copy(f"COPY ns_memories ({', '.join(COLUMNS)}) FROM STDIN") as copy:
            n = 0
            for row in data:
                copy.write_row(row)
                n += 1
        return n


def copy_langgraph(url: str, data: Iterator[tuple[object, ...]]) -> None:
    with psycopg.connect(_libpq(url)) as conn, conn.cursor() as cur:
        sql = "COPY store (prefix, key, value, created_at, updated_at) FROM STDIN"
        with cur.copy(sql) as copy:
            for row in data:
                copy.write_row(langgraph_row(row))


def _libpq(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


@contextmanager
def fresh_database(admin_url: str, keep: bool = False) -> Iterator[str]:
    """A new, empty database on the server of `admin_url`; dropped afterwards."""
    name = f"ns_bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(_libpq(admin_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
    finally:
        if not keep:
            with psycopg.connect(_libpq(admin_url), autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
