"""What the write gate does with ordinary observed facts: `python -m bench.gate_false_positives`.

Runs every text of `tests.unit.memory.ordinary_facts` (the accepted corpus and the
texts deliberately left refused) through `memory.policy.judge` as an OBSERVED
fact and prints each one not accepted as is, then counts by rule and by kind.
A false positive is a refusal: the fact an agent observed is lost. A plan kept
as an episode (``goal-source``) is stored and is counted apart.
"""

from __future__ import annotations

from collections import Counter

from memory.policy import Action, AgentRules, judge
from memory.records import Candidate, Kind, Provenance, Scope, Source
from tests.unit.memory.ordinary_facts import LEFT_REFUSED, ORDINARY_FACTS


def main() -> None:
    texts = [(kind, text) for kind, group in ORDINARY_FACTS.items() for text in group]
    texts += [("left refused", text) for text in LEFT_REFUSED]
    refused: Counter[str] = Counter()
    kept_otherwise: Counter[str] = Counter()
    by_kind: Counter[str] = Counter()
    rules = AgentRules.default()
    for kind, text in texts:
        candidate = Candidate(
            Scope("acme", "ana", "triage"), Kind.FACT, text, Provenance(Source.OBSERVED)
        )
        verdict = judge(candidate, rules)
        if verdict.rule == "ok":
            continue
        print(f"{verdict.action:7} {verdict.rule:20} {kind:24} {text!r}")
        if verdict.action is Action.REFUSE:
            refused[verdict.rule] += 1
            by_kind[kind] += 1
        else:
            kept_otherwise[verdict.rule] += 1
    total = sum(refused.values())
    print(f"\n{len(texts)} texts, {total} refused ({total / len(texts):.1%})")
    for rule, count in refused.most_common():
        print(f"  refused by {rule}: {count}")
    for kind, count in by_kind.most_common():
        print(f"  refused among {kind}: {count}")
    for rule, count in kept_otherwise.most_common():
        print(f"  stored, but not as a fact ({rule}): {count}")


if __name__ == "__main__":
    main()
