"""Which votes count: a run's on what it was given, the operator's on its tenant.

A down-vote lowers a memory's score, and under the load bar a memory is no longer
loaded: a vote can silence a memory. So who may vote on what is a rule of its own:

- **A run** votes only on a memory it was given: the ids its run record keeps (the
  load, and what it searched or read on demand; `nightshift memory why RUN` lists
  them). Any other id is refused — another tenant's memory, another user's, one
  the run never saw — whether or not it exists, so a refusal tells nothing about
  what other scopes hold.
- **The operator** (`nightshift memory vote --tenant T`) votes on any active
  memory of the tenant it names, and only of that one.
- **Never an agent against a person's or the operator's word.** A run's down-vote
  on a `stated` or `operator` memory is refused: the person (or the operator)
  changes what they said themselves — an edit, a forget, a new statement on the
  key — and an agent that finds it wrong says so in a memory of its own, which
  the gate judges ("a statement by the person beats an inference until the person
  changes it"). A run's up-vote on such a memory counts: it only keeps the memory
  loaded longer. Refusing the down-vote outright, rather than flooring the score
  above the load bar, keeps one meaning for a score (what votes and time did) and
  makes the refusal visible instead of a vote that silently does less.

`judge` is the rule, pure; the run's context asks it before accepting a vote (so
the agent hears the reason at once), the MCP tool asks it inside the sandbox, and
`memory.reinforcement.apply_votes` asks it again against the run's record, which
is the one that counts. A reason names ids and sources, never memory content.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Set
from dataclasses import dataclass

from memory.records import Source

WORD_SOURCES = frozenset({Source.STATED, Source.OPERATOR})
"""Sources whose memory is a person's or the operator's word: no agent's down-vote moves it."""

_SHOWN_ID = re.compile(r"[0-9A-Za-z_-]{1,36}")


class Fate(enum.StrEnum):
    COUNTS = "counts"
    UNKNOWN = "unknown"  # allowed, but no active memory by that id in the voter's tenant
    REFUSED = "refused"


@dataclass(frozen=True, slots=True)
class VoteRights:
    """What one voter's votes may reach: memories of `tenant`, and among those only the
    ids in `given` — or, with `given` None, any of them (the operator's rights)."""

    tenant: str
    given: frozenset[str] | None = None

    @classmethod
    def of_run(cls, tenant: str, given: Iterable[str]) -> VoteRights:
        return cls(tenant, frozenset(given))

    @classmethod
    def of_operator(cls, tenant: str) -> VoteRights:
        return cls(tenant, None)


@dataclass(frozen=True, slots=True)
class VoteVerdict:
    fate: Fate
    reason: str = ""  # REFUSED only; ids and sources, never content


COUNTS = VoteVerdict(Fate.COUNTS)
UNKNOWN = VoteVerdict(Fate.UNKNOWN)


def judge(
    memory_id: str, direction: str, source: Source | None, *, given: Set[str] | None
) -> VoteVerdict:
    """Whether a vote counts.

    Args:
        memory_id: the memory voted on.
        direction: ``"up"`` or ``"down"``.
        source: the source of the active memory with that id in the voter's tenant,
            or None when there is none.
        given: the ids the voting run was given; None for the operator.
    """
    if given is not None and memory_id not in given:
        return VoteVerdict(
            Fate.REFUSED,
            f"memory {shown_id(memory_id)} was not given to this run; a run votes only on"
            " the memories it was given (see `nightshift memory why RUN`)",
        )
    if source is None:
        return UNKNOWN
    if given is not None and direction == "down" and source in WORD_SOURCES:
        who = "person" if source is Source.STATED else "operator"
        return VoteVerdict(
            Fate.REFUSED,
            f"memory {shown_id(memory_id)} is the {who}'s word (source {source}); an"
            f" agent's down-vote does not silence it: the {who} changes it (edit, forget,"
            " a new statement)",
        )
    return COUNTS


NO_RUN = VoteVerdict(
    Fate.REFUSED,
    "the vote names no run with a record of what it was given; a vote counts only from"
    " the run that was given the memory, or from the operator",
)
"""The verdict on a vote whose run has no record, or that names no run at all."""


NOT_AN_ID = "(not an id)"


def shown_id(text: str) -> str:
    """`text` when it is shaped like an id; otherwise `NOT_AN_ID`: a refused vote is
    reported and audited, and a made-up "id" could hold anything."""
    return text if _SHOWN_ID.fullmatch(text) else NOT_AN_ID
