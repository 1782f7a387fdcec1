"""Near-duplicate texts: which of a group's texts say the same thing in nearly the
same words (Jaccard similarity of their word sets at or above a bar).

Pure Python, no database. Candidates come from locality-sensitive hashing
(`sketch`: per band, the two smallest word hashes under that band's seed), so the
cost grows with the number of texts, not with its square; each candidate pair is
then checked exactly and the pairs that pass are joined by union-find.

    groups(["the invoice is due", "the invoice is due soon", "unrelated"], 0.7)
    # -> [[0, 1]]
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Iterable, Sequence

_SEEDS = (0x5BD1E995, 0x27D4EB2F, 0x165667B1)  # one XOR permutation of word hashes per band
_WORD = re.compile(r"\w+")


def words_of(content: str) -> frozenset[str]:
    return frozenset(_WORD.findall(content.lower()))


def groups(contents: Sequence[str], bar: float) -> list[list[int]]:
    """Indexes of `contents` that are near-duplicates of each other, one list per
    group of two or more, each in ascending order."""
    texts = [words_of(c) for c in contents]
    buckets: dict[tuple[int, ...], list[int]] = {}
    for i, words in enumerate(texts):
        for key in sketch(words):
            if key in buckets:
                buckets[key].append(i)
            else:
                buckets[key] = [i]
    return clusters(texts, buckets.values(), bar)


def sketch(words: frozenset[str]) -> list[tuple[int, ...]]:
    """LSH keys: per band, the two smallest hashes of the words under that band's seed.

    Two texts share a band's key when their two minimum words agree, which for
    Jaccard 0.85 happens in most of the 3 bands and for unrelated texts almost never,
    so candidate buckets stay small however common a word is.
    """
    if len(words) < 2:
        return [(0, *(_word_hash(w) for w in words))]
    cache = _BAND_HASHES
    try:
        hashed = list(map(cache.__getitem__, words))
    except KeyError:
        if len(cache) > _BAND_CACHE_SIZE:
            cache.clear()
        hashed = [cache.get(w) or _band_hashes(w) for w in words]
    first, second, third = map(sorted, zip(*hashed, strict=True))  # one column per band
    return [
        (_SEEDS[0], first[0], first[1]),
        (_SEEDS[1], second[0], second[1]),
        (_SEEDS[2], third[0], third[1]),
    ]


@functools.lru_cache(maxsize=1 << 16)
def _word_hash(word: str) -> int:
    """A hash that is the same in every process (Python's `hash` of a str is salted
    per process, which made the same plan differ from run to run)."""
    return int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")


def _band_hashes(word: str) -> tuple[int, ...]:
    """The word's hash under every band's seed, computed once per word and kept in a
    bounded dict (a vocabulary is far smaller than the rows that use it; a plain dict
    lookup costs a third of an `lru_cache` call, and this runs for every word of every row)."""
    value = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
    mixed = _BAND_HASHES[word] = tuple(_mix(value, seed) for seed in _SEEDS)
    return mixed


_BAND_HASHES: dict[str, tuple[int, ...]] = {}
_BAND_CACHE_SIZE = 1 << 18


def _mix(value: int, seed: int) -> int:
    """A cheap, well-spread 64-bit permutation per seed (multiply, then xor-shift)."""
    x = ((value ^ seed) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


def clusters(
    texts: Sequence[frozenset[str]], buckets: Iterable[list[int]], bar: float
) -> list[list[int]]:
    """Union-find over candidate pairs whose Jaccard similarity reaches `bar`."""
    parent = list(range(len(texts)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for members in buckets:
        if not 2 <= len(members) <= 200:  # a word shared by hundreds of texts is no signal
            continue
        for pos, a in enumerate(members):
            for b in members[pos + 1 :]:
                if root(a) != root(b) and _jaccard(texts[a], texts[b]) >= bar:
                    parent[root(a)] = root(b)
    groups: dict[int, list[int]] = {}
    for i in range(len(texts)):
        groups.setdefault(root(i), []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 1.0 if a == b else 0.0
    small, large = sorted((len(a), len(b)))
    if small < large * 0.5:  # cannot reach any useful bar
        return small / large
    return len(a & b) / len(a | b)
