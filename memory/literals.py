"""The literals a regular expression cannot match without: a prefilter made from it.

`required(pattern)` reads a compiled pattern's syntax tree and returns sets of
strings such that every match of the pattern contains, as a substring, at least
one string of each set. A text missing every string of one set has no match.
`screen(patterns)` gathers the most telling set of each of many patterns into one
trie: a text it finds nothing in matches none of them, told by one C-level scan
instead of one search per pattern. The write gate runs some thirty patterns over
every candidate (`memory.phrasing`), each searched at a few tenths of a
microsecond; the screen costs about as much as two of them.

The analysis is conservative: wherever it cannot be sure (a character class with
categories, a back reference, a flag such as IGNORECASE, a repeat that may be
empty) it derives nothing, and a pattern with nothing derived is always searched.
Only what the syntax tree says is used, so the prefilter answers "no match" only
when the regex would: `tests/unit/memory/test_literals.py` checks that against
the full search over random and adversarial text.

Example:
    >>> required(re.compile(r"ignore\\s+(?:all|any)\\s+rules"))[:2]
    (frozenset({'ignore'}), frozenset({'rules'}))
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from re import _constants as sre  # type: ignore[attr-defined]
from re import _parser as sre_parse  # type: ignore[attr-defined]
from typing import Any

_MAX_STRINGS = 64
"""The most strings an exact set or a product of them may hold before it is given up
(as a requirement it would cost more `in` checks than the search it spares)."""
_MAX_CLASS = 8
"""The most characters a character class may have to count as a set of literals."""
_MAX_EXPAND = 3
"""The most repetitions of an exact body written out as strings."""


@dataclass(frozen=True, slots=True)
class _Info:
    """What is known of a piece of pattern: `exact`, every string it can match (None
    when unknown or too many), and `needs`, sets each of which holds a substring of
    every match."""

    exact: frozenset[str] | None
    needs: tuple[frozenset[str], ...]


_UNKNOWN = _Info(None, ())
_EMPTY = _Info(frozenset({""}), ())


def required(pattern: re.Pattern[str]) -> tuple[frozenset[str], ...]:
    """Sets of strings, each holding a substring of every match of `pattern`, best
    (most telling) first. Empty when nothing can be said: search always."""
    if pattern.flags & (re.IGNORECASE | re.VERBOSE) or not isinstance(pattern.pattern, str):
        return ()
    try:
        tree = sre_parse.parse(pattern.pattern, pattern.flags)
    except re.error:  # pragma: no cover - the pattern compiled, so it parses
        return ()
    if tree.state.flags & re.IGNORECASE:  # an inline (?i) at the start
        return ()
    info = _sequence(list(tree))
    sets = list(info.needs)
    if info.exact is not None:
        sets.append(info.exact)
    useful = {s for s in sets if s and "" not in s}
    return tuple(sorted(useful, key=_score, reverse=True))


def screen(patterns: Iterable[re.Pattern[str]]) -> re.Pattern[str]:
    """A pattern found in every text that one of `patterns` matches: a trie (`trie`) of
    the most telling required set of each (`required`). A text where it finds
    nothing matches none of them, known in one C-level scan. When some pattern
    requires nothing, the screen is the empty pattern, found in every text."""
    strings: set[str] = set()
    for pattern in patterns:
        sets = required(pattern)
        if not sets:
            return re.compile("")
        strings |= sets[0]
    return re.compile(trie(sorted(strings)))


def trie(words: Sequence[str]) -> str:
    """A regex matching any of `words`, as a trie of literals ("a(?:kia|ws)|…"): its
    alternatives each open with a literal, so the engine skips ahead to the next
    possible first character instead of trying every alternative at every position."""
    groups: dict[str, list[str]] = {}
    for word in words:
        if word:
            groups.setdefault(word[0], []).append(word[1:])
    arms = [re.escape(first) + trie(rest) for first, rest in sorted(groups.items())]
    if not arms:
        return ""
    body = arms[0] if len(arms) == 1 else f"(?:{'|'.join(arms)})"
    return f"(?:{body})?" if "" in words else body


def _score(strings: frozenset[str]) -> tuple[int, int]:
    """How telling a set is: the longer its shortest string and the fewer its strings,
    the rarer a text holding one of them."""
    return (min((len(s) for s in strings), default=0), -len(strings))


def _best(sets: Sequence[frozenset[str]]) -> frozenset[str] | None:
    usable = [s for s in sets if s and "" not in s]
    return max(usable, key=_score) if usable else None


def _product(left: frozenset[str], right: frozenset[str]) -> frozenset[str] | None:
    if len(left) * len(right) > _MAX_STRINGS:
        return None
    return frozenset(a + b for a in left for b in right)


def _sequence(items: list[tuple[Any, Any]]) -> _Info:
    """A run of pattern items, matched one after the other."""
    needs: list[frozenset[str]] = []
    run: frozenset[str] | None = frozenset({""})  # exact strings of the items so far
    whole = True  # whether `run` covers every item so far
    for op, av in items:
        info = _item(op, av)
        needs.extend(info.needs)
        joined = _product(run, info.exact) if run is not None and info.exact is not None else None
        if joined is not None:
            run = joined
            continue
        # The run ends here: what it matched is a substring of every match.
        if run is not None:
            needs.append(run)
        whole = False
        run = info.exact  # a fresh run starts with this item, if it is exact
        if run is None:
            run = frozenset({""})
    if whole:
        return _Info(run, tuple(needs))
    if run is not None:
        needs.append(run)
    return _Info(None, tuple(needs))


def _item(op: Any, av: Any) -> _Info:
    if op is sre.LITERAL:
        return _Info(frozenset({chr(av)}), ())
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
        return _EMPTY  # zero width: what is around it is matched next to each other
    if op is sre.IN:
        return _Info(_class(av), ())
    if op is sre.SUBPATTERN:
        _group, add_flags, del_flags, body = av
        if (add_flags | del_flags) & (re.IGNORECASE | re.VERBOSE):
            return _UNKNOWN
        return _sequence(list(body))
    if op is sre.ATOMIC_GROUP:
        return _sequence(list(av))
    if op is sre.BRANCH:
        return _branch([_sequence(list(alt)) for alt in av[1]])
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        low, high, body = av
        return _repeat(low, high, _sequence(list(body)))
    return _UNKNOWN  # ANY, NOT_LITERAL, GROUPREF, CATEGORY, ...: nothing known


def _class(items: Any) -> frozenset[str] | None:
    """The characters of a character class, when it is a short list of literals."""
    chars: set[str] = set()
    for op, av in items:
        if op is sre.LITERAL:
            chars.add(chr(av))
        elif op is sre.RANGE and av[1] - av[0] < _MAX_CLASS:
            chars.update(chr(c) for c in range(av[0], av[1] + 1))
        else:  # NEGATE, CATEGORY, a long range
            return None
        if len(chars) > _MAX_CLASS:
            return None
    return frozenset(chars)


def _branch(alternatives: list[_Info]) -> _Info:
    exact: frozenset[str] | None = frozenset()
    for alt in alternatives:
        if exact is None or alt.exact is None or len(exact) + len(alt.exact) > _MAX_STRINGS:
            exact = None
        else:
            exact = exact | alt.exact
    # Every match is one alternative's: it holds a string of that alternative's best set.
    union: set[str] = set()
    for alt in alternatives:
        best = _best([*alt.needs, *([alt.exact] if alt.exact is not None else [])])
        if best is None:
            return _Info(exact, ())
        union |= best
    return _Info(exact, (frozenset(union),) if len(union) <= _MAX_STRINGS else ())


def _repeat(low: int, high: int, body: _Info) -> _Info:
    if body.exact is not None and high <= _MAX_EXPAND:
        strings: set[str] = set()
        power: frozenset[str] | None = frozenset({""})
        for count in range(high + 1):
            if power is None:
                break
            if count >= low:
                strings |= power
            if count < high:
                power = _product(power, body.exact)
        if power is not None and len(strings) <= _MAX_STRINGS:
            return _Info(frozenset(strings), body.needs if low else ())
    if low == 0:
        return _UNKNOWN  # may match nothing at all
    sets = list(body.needs)
    if body.exact is not None:
        sets.append(body.exact)  # the first repetition is one of them
    return _Info(None, tuple(sets))
