"""Which scopes a read may see: the reader's layers, the agent's attachment, the trigger.

A read for `(tenant, user, agent)` sees its own layer and those above it — never
another user's memory, never another agent's private memory (`Scope.readable`).
The agent's attachment (`AgentRules`) narrows that further: an agent whose reads
are switched off sees nothing; a layer it is not attached to is not read; and the
person's own layers (private, shared) are given only to runs whose trigger origin
the agent's `user_memory_from` allows — by default only a trigger private to that
person. Operator reads (the CLI) pass no rules and see the scope's full chain.

Example:
    >>> from memory.records import Scope
    >>> [str(s) for s in readable_scopes(Scope("acme", "ana", "triage"),
    ...                                  AgentRules.default(), origin="channel")]
    ['acme/*/triage', 'acme/*/*']
"""

from __future__ import annotations

from memory.policy import AgentRules
from memory.records import Scope

OPERATOR = None
"""Pass as `rules` for an operator's read: the scope's own chain, unfiltered."""


def readable_scopes(
    scope: Scope, rules: AgentRules | None = OPERATOR, *, origin: str | None = None
) -> tuple[Scope, ...]:
    """The scopes a read by `scope` may return rows from, narrowest first.

    `origin` is where the run's trigger came from (``private``, ``shared``, ``api``…).
    With `rules` given and `origin` None, the origin counts as unknown: user memory
    is withheld unless the rules allow the empty origin.
    """
    chain = scope.readable()
    if rules is None:
        return chain
    where = origin or ""
    return tuple(s for s in chain if rules.may_read(s.layer, where))
