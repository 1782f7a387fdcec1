"""Property: over random scopes, writes and reads, no read returns a memory from a
sideways or lower scope — on every backend, for every read path."""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory.access import readable_scopes
from memory.policy import AgentRules
from memory.records import Candidate, Kind, Layer, Provenance, Scope, Source
from memory.store import Store

USERS = st.sampled_from(["", "ana", "bob"])
AGENTS = st.sampled_from(["", "triage", "billing"])
SCOPES = st.tuples(st.sampled_from(["acme", "globex"]), USERS, AGENTS)
KINDS = st.sampled_from([Kind.FACT, Kind.EPISODE, Kind.PREFERENCE, Kind.INSTRUCTION])
RULES = st.one_of(
    st.none(),
    st.builds(
        AgentRules,
        reads_enabled=st.booleans(),
        readable_layers=st.frozensets(st.sampled_from(list(Layer))),
        user_memory_from=st.frozensets(st.sampled_from(["private", "shared", "api"])),
    ),
)
ORIGINS = st.sampled_from([None, "private", "shared", "api"])


def _scope(run: str, parts: tuple[str, str, str]) -> Scope:
    return Scope(f"{run}-{parts[0]}", parts[1], parts[2])


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    writes=st.lists(st.tuples(SCOPES, KINDS, st.booleans()), min_size=1, max_size=12),
    reader=SCOPES,
    rules=RULES,
    origin=ORIGINS,
)
def test_no_read_returns_a_sideways_or_lower_memory(
    store: Store,
    writes: list[tuple[tuple[str, str, str], Kind, bool]],
    reader: tuple[str, str, str],
    rules: AgentRules | None,
    origin: str | None,
) -> None:
    run = uuid.uuid4().hex[:8]  # one store serves every example: each gets its own tenants
    candidates = [
        Candidate(
            scope=_scope(run, parts),
            kind=kind,
            content=f"zeta note {i} for {'/'.join(parts)}",
            key="slot" if keyed else "",
            provenance=Provenance(Source.OPERATOR, task_id=f"{run}-{i}"),
        )
        for i, (parts, kind, keyed) in enumerate(writes)
    ]
    receipt = store.apply(candidates, handle=f"{run}:w", actor="operator")
    ids = [d.memory_id for d in receipt.decisions if d.memory_id]
    scope = _scope(run, reader)
    chain = set(scope.readable())
    narrowed = set(readable_scopes(scope, rules, origin=origin))
    assert narrowed <= chain

    def check(found: list[Scope], allowed: set[Scope]) -> None:
        stray = [s for s in found if s not in allowed]
        assert not stray, f"{scope} read {stray}"

    shown = store.show(scope, all_statuses=True)
    check([m.scope for m in shown], chain)
    expected = {c.content for c in candidates if c.scope in chain}
    assert {m.content for m in shown} == expected  # and nothing readable is missing
    check([m.scope for m in store.get(scope, ids)], chain)
    check([m.scope for m in store.history(scope, "slot")], chain)
    check([m.scope for m in store.pending_review(scope)], chain)
    check([m.scope for m in store.export(scope)], {scope})
    result = store.load(scope, goal="zeta note", rules=rules, origin=origin)
    check([m.scope for m in (*result.hot, *result.ranked)], narrowed)
    hits = store.search(scope, "zeta", rules=rules, origin=origin)
    check([m.scope for m, _ in hits], narrowed)
