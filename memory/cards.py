"""Card numbers in text: 13 to 19 digits, contiguous or in groups, that pass the
Luhn check and start like an issued card (`memory.secrets` names them
``card_number``; its docstring lists the separators read).

Groups split by a comma, a tab or a line break are how lists are written ("orders
5521, 5522, 5523, 5524"), and one list of four-digit numbers in twelve passes Luhn
with a card's first digits. Read that way, a card is four groups of four digits
standing alone, not in ascending order: a fifth number beside them, or ascending
groups, make a list. About one card in forty has ascending groups: written with
commas or line breaks it is missed, where one list in twelve was refused.
"""

from __future__ import annotations

import re

# Card numbers: first runs of 13+ digits and separators (cheap), then inside a run,
# 13-19 digits either contiguous or as a group of four and 2-4 groups of 3-6 (4-4-4-4,
# 4-6-5, 4-4-4-4-3...), not inside a word, a decimal or a +phone number. ASCII digits
# only: `\d` would also take other scripts' digits (`find_secrets_as_read` reads
# those as ASCII first).
DIGIT_RUN = re.compile(r"[0-9][0-9 ./_\u2013,\t\r\n-]{11,}[0-9]")
_CARD = re.compile(
    r"[0-9](?<![A-Za-z0-9_+][0-9])(?<![0-9][.,][0-9])"
    r"(?:[0-9]{12,18}|[0-9]{3}(?:(?: ?[-\u2013,] ?|[ ./_\t\n]| {2}|\r\n)[0-9]{3,6}){2,4})"
    r"(?![A-Za-z0-9_])(?![.,][0-9])"
)
_CARD_GROUP = re.compile(r"[0-9]+")
_LIST_SEPARATOR = frozenset(",\t\r\n")
"""A separator with one of these between groups writes a list, not a card."""
_LIST_BEFORE = re.compile(r"[0-9] ?(?:,|\t|\r?\n) ?$")
_LIST_AFTER = re.compile(r" ?(?:,|\t|\r?\n) ?[0-9]")


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _issued_card(digits: str) -> bool:
    if not 13 <= len(digits) <= 19:
        return False
    if digits[0] in "3456":
        return _luhn_ok(digits)
    # Mir (2200-2204) and Mastercard's 2-series (2221-2720); excludes years like 2024.
    return digits[0] == "2" and 2200 <= int(digits[:4]) <= 2720 and _luhn_ok(digits)


def _a_list(text: str, groups: list[tuple[int, int]]) -> bool:
    """Whether groups joined by a comma, a tab or a line break are a list of numbers
    rather than a card (see the module's docstring)."""
    separators = "".join(text[a[1] : b[0]] for a, b in zip(groups, groups[1:], strict=False))
    if _LIST_SEPARATOR.isdisjoint(separators):
        return False
    values = [text[s:e] for s, e in groups]
    if len(values) != 4 or any(len(v) != 4 for v in values):
        return True
    if all(a < b for a, b in zip(values, values[1:], strict=False)):
        return True  # sorted: ids, years, prices
    start, end = groups[0][0], groups[-1][1]
    return bool(_LIST_BEFORE.search(text, max(0, start - 5), start)) or bool(
        _LIST_AFTER.match(text, end)
    )


def _card_span(text: str, match: re.Match[str]) -> tuple[int, int] | None:
    """The longest leftmost run of groups inside `match` that is an issued card number."""
    groups = [g.span() for g in _CARD_GROUP.finditer(text, match.start(), match.end())]
    for first, (start, first_end) in enumerate(groups):
        if text[start] not in "23456" or (first and first_end - start != 4):
            continue
        for last in range(len(groups) - 1, first - 1, -1):
            end = groups[last][1]
            digits = "".join(text[s:e] for s, e in groups[first : last + 1])
            if len(digits) < 13:
                break
            if _issued_card(digits) and not _a_list(text, groups[first : last + 1]):
                return start, end
    return None


def card_spans(text: str) -> list[tuple[int, int]]:
    """Where in `text` an issued card number stands, by (start, end)."""
    found: list[tuple[int, int]] = []
    for run in DIGIT_RUN.finditer(text):
        pos = run.start()
        while (match := _CARD.search(text, pos, run.end() + 1)) and match.start() < run.end():
            span = _card_span(text, match)
            if span is None:
                pos = match.end()
            else:
                found.append(span)
                pos = span[1]
    return found
