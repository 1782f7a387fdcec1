"""How a LangGraph item `(namespace, key)` becomes a nightshift memory, and back.

- **key column** — ``lg:`` + the namespace labels, each percent-encoded and joined
  by ``/``, then ``:`` + the percent-encoded item key, e.g.
  ``("users", "ana/b")`` / ``"prefs"`` → ``lg:users/ana%2Fb:prefs``. Percent-encoding
  leaves ``/`` and ``:`` only as separators, so the mapping is injective. When the
  result would not fit the 256-character key column it becomes
  ``lg#`` + the SHA-256 of the canonical JSON ``[namespace, key]`` (64 hex digits);
  the two forms cannot collide because their prefixes differ.
- **reference** — provenance reference ``langgraph:`` + canonical JSON
  ``{"key", "namespace", "ttl"}``: the exact path (so hashed keys decode too) and
  the item's TTL in minutes (what a refresh on read extends it by).
- **content** — the value as canonical JSON (sorted keys, no spaces, UTF-8 kept
  so full-text search sees the words).

Keys in the ``lg:`` / ``lg#`` families are reserved for the adapter; rows whose
reference is not a LangGraph one are ignored by it.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from langgraph.store.base import InvalidNamespaceError

from memory.folding import ITEM_KEY_PREFIXES
from memory.policy import DEFAULT_CONFIG

KEY_PREFIX, HASHED_PREFIX = ITEM_KEY_PREFIXES  # "lg:", "lg#": matched as written
REFERENCE_PREFIX = "langgraph:"
MAX_KEY_CHARS = DEFAULT_CONFIG.max_key_chars
# A century: far past any retention nightshift keeps, and far enough from the end of
# the calendar that now + ttl is always a date (1e300 minutes was an OverflowError).
MAX_TTL_MINUTES = 100 * 366 * 24 * 60


@dataclass(frozen=True, slots=True)
class ItemPath:
    """Where an item lives in LangGraph terms, plus the TTL it was written with."""

    namespace: tuple[str, ...]
    key: str
    ttl: float | None = None


def canonical(data: Any) -> str:
    return json.dumps(
        data, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def memory_key(namespace: tuple[str, ...], key: str) -> str:
    """The nightshift key of `(namespace, key)`: readable when it fits, hashed when not."""
    path = "/".join(quote(label, safe="") for label in namespace)
    readable = f"{KEY_PREFIX}{path}:{quote(key, safe='')}"
    if len(readable) <= MAX_KEY_CHARS:
        return readable
    digest = hashlib.sha256(canonical([list(namespace), key]).encode()).hexdigest()
    return HASHED_PREFIX + digest


def is_item_key(key: str) -> bool:
    return key.startswith((KEY_PREFIX, HASHED_PREFIX))


def reference(path: ItemPath) -> str:
    body = {"key": path.key, "namespace": list(path.namespace), "ttl": path.ttl}
    return REFERENCE_PREFIX + canonical(body)


def parse_reference(text: str) -> ItemPath | None:
    """The item path a reference names; None for a memory the adapter did not write."""
    if not text.startswith(REFERENCE_PREFIX):
        return None
    try:
        body = json.loads(text[len(REFERENCE_PREFIX) :])
        ttl = body.get("ttl")
        return ItemPath(
            tuple(str(label) for label in body["namespace"]),
            str(body["key"]),
            float(ttl) if ttl is not None else None,
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def encode_value(namespace: tuple[str, ...], key: str, value: Mapping[str, Any]) -> str:
    """The value as canonical JSON; a clear error naming the item when it is not JSON."""
    if not isinstance(value, Mapping):
        raise TypeError(
            f"LangGraph item {namespace}/{key!r}: value must be a mapping, "
            f"got {type(value).__name__}"
        )
    try:
        text = canonical(dict(value))
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"LangGraph item {namespace}/{key!r}: value is not JSON-serialisable ({error})"
        ) from error
    except RecursionError:
        raise TypeError(
            f"LangGraph item {namespace}/{key!r}: value nests too deeply to encode as JSON;"
            " flatten it"
        ) from None
    if not _is_utf8(text):
        raise TypeError(
            f"LangGraph item {namespace}/{key!r}: value holds a lone surrogate, which is"
            " not valid UTF-8 and cannot be stored"
        )
    return text


def decode_value(content: str) -> dict[str, Any]:
    value = json.loads(content)
    if not isinstance(value, dict):
        raise ValueError("a LangGraph item's content must be a JSON object")
    return value


def validate_put_namespace(namespace: tuple[str, ...]) -> None:
    """LangGraph's rules for a namespace that is written to, with its messages."""
    if not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    for label in namespace:
        if not isinstance(label, str):
            raise InvalidNamespaceError(
                f"Invalid namespace label '{label}' found in {namespace}. Namespace labels"
                f" must be strings, but got {type(label).__name__}."
            )
        if "." in label:
            raise InvalidNamespaceError(
                f"Invalid namespace label '{label}' found in {namespace}. "
                "Namespace labels cannot contain periods ('.')."
            )
        if "\x00" in label:
            raise InvalidNamespaceError(
                f"Invalid namespace label '{label}' found in {namespace}. "
                "Namespace labels cannot contain NUL bytes ('\\x00')."
            )
        if not label:
            raise InvalidNamespaceError(
                f"Namespace labels cannot be empty strings. Got {label} in {namespace}"
            )
        if not _is_utf8(label):
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} found in {namespace}. "
                "Namespace labels must be valid UTF-8 (no lone surrogates)."
            )
    if namespace[0] == "langgraph":
        raise InvalidNamespaceError(
            f'Root label for namespace cannot be "langgraph". Got: {namespace}'
        )


def validate_key(namespace: tuple[str, ...], key: object) -> None:
    """An item key is a string that UTF-8 can encode (it becomes part of the key column)."""
    if not isinstance(key, str):
        raise ValueError(
            f"LangGraph item {namespace}: key must be a string, got {type(key).__name__}"
        )
    if not _is_utf8(key) or not all(_is_utf8(label) for label in namespace):
        raise ValueError(
            f"LangGraph item {namespace}/{key!r}: key {key!r} is not valid UTF-8"
            " (a lone surrogate); no item can be stored or found under it"
        )


def validate_ttl(namespace: tuple[str, ...], key: str, ttl: object) -> None:
    """A put's TTL: None (never expires) or a positive, finite number of minutes.

    A TTL already over would store an item no read returns; NaN, infinities and
    numbers past `MAX_TTL_MINUTES` cannot become a `valid_to`.
    """
    if ttl is None:
        return
    usable = (
        isinstance(ttl, int | float)
        and not isinstance(ttl, bool)
        and math.isfinite(ttl)
        and 0 < ttl <= MAX_TTL_MINUTES
    )
    if not usable:
        raise ValueError(
            f"LangGraph item {namespace}/{key!r}: ttl must be None or minutes in"
            f" (0, {MAX_TTL_MINUTES}], got {ttl!r}"
        )


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
