"""One acceptance test per adapter, against real worker and writer processes.

Redis + PostgreSQL; the command agent is a shell script that greps its memory
files, the LLM agent talks to a local scripted endpoint, the Python agent spawns
two subagents and cancels one.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory.records import Candidate, Kind, Provenance, Scope, Source
from memory.store import Store
from tests.acceptance.harness import FakeChat, System, chat_calls, chat_text
from workers.runs import FINISHED, Run, RunStatus
from workers.sandbox import leftovers

pytestmark = [
    pytest.mark.acceptance,
    pytest.mark.parametrize("system", ["redis-postgres"], indirect=True),
]

GREP_AGENT = """#!/bin/sh
set -e
hit=$(grep -l "outage" memory/*.md | head -n 1)
printf '{"type":"remember","content":"billing outages recur on Mondays","source":"observed","reference":"%s"}\\n' "$hit" >> "$NIGHTSHIFT_OUTBOX"
printf '{"type":"outcome","summary":"grepped %s files","tried":"grep memory for outage"}\\n' "$(ls memory | wc -l)" >> "$NIGHTSHIFT_OUTBOX"
"""


def seed(system: System, agent: str, text: str) -> None:
    Store(system.engine).apply(
        [Candidate(Scope("acme", "ana", agent), Kind.FACT, text, Provenance(Source.OPERATOR))],
        handle=f"seed:{agent}",
        actor="test",
    )


def stored(system: System, agent: str) -> dict[str, Kind]:
    return {m.content: m.kind for m in Store(system.engine).show(Scope("acme", "ana", agent))}


def trigger(system: System, agent: str, goal: str) -> Run:
    result = system.cli(
        "trigger",
        agent,
        "--tenant",
        "acme",
        "--user",
        "ana",
        "--goal",
        goal,
        "--origin",
        "private",
        "--json",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    key = json.loads(result.stdout)["run_key"]
    return system.wait_for(
        f"run {key} to finish",
        lambda: next((r for r in system.runs() if r.key == key and r.status in FINISHED), None),
        timeout=120,
    )


def start(system: System, agents: str, **env: str) -> None:
    system.env["NIGHTSHIFT_AGENTS"] = agents
    system.env.update(env)
    system.start("worker")
    system.start("writer")


def test_command_agent_in_shell_greps_memory_and_leaves_candidates(
    system: System, tmp_path: Path
) -> None:
    program = tmp_path / "grep-agent.sh"
    program.write_text(GREP_AGENT)
    program.chmod(0o755)
    seed(system, "grep", "INC-1 billing outage on a Monday")
    start(system, f"grep=command:{program}")
    run = trigger(system, "grep", "billing outages")
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.summary == "grepped 1 files" and len(run.loaded_ids) == 1
    system.wait_for(
        "the candidate to be stored",
        lambda: stored(system, "grep").get("billing outages recur on Mondays") is Kind.FACT,
    )
    assert leftovers(Path(system.env["NIGHTSHIFT_DATA_DIR"]) / "sandboxes") == []


def test_llm_agent_calls_memory_tools_against_a_fake_endpoint(system: System) -> None:
    replies = [
        chat_calls(("search_memory", {"query": "outage"})),
        chat_calls(
            (
                "remember",
                {"content": "payments outage was DNS", "source": "inferred", "kind": "episode"},
            ),
        ),
        chat_text("Found the outage cause."),
    ]
    seed(system, "helper", "payments outage on Friday")
    with FakeChat(replies) as chat:
        start(system, "helper=llm:fake-model", NIGHTSHIFT_LLM_BASE_URL=chat.url)
        run = trigger(system, "helper", "payments")
    assert run.status is RunStatus.SUCCEEDED, run.error
    assert run.summary == "Found the outage cause."
    assert [r["messages"][-1]["role"] for r in chat.requests] == ["user", "tool", "tool"]
    assert "payments outage on Friday" in chat.requests[1]["messages"][-1]["content"]
    system.wait_for(
        "the episode to be stored",
        lambda: stored(system, "helper").get("payments outage was DNS") is Kind.EPISODE,
    )


def test_python_agent_spawns_two_subagents_one_succeeds_one_is_cancelled(system: System) -> None:
    start(
        system,
        "planner=tests.acceptance.agents:planner;researcher=tests.acceptance.agents:researcher",
    )
    parent = trigger(system, "planner", "price research")
    assert parent.status is RunStatus.SUCCEEDED

    def children() -> dict[str, Run] | None:
        kids = {r.subagent: r for r in system.runs() if r.parent_key == parent.key}
        done = len(kids) == 2 and all(r.status in FINISHED for r in kids.values())
        return kids if done else None

    kids = system.wait_for("both subagents to finish", children, timeout=120)
    assert kids["prices"].status is RunStatus.SUCCEEDED
    assert kids["history"].status is RunStatus.CANCELLED
    system.wait_for(
        "the succeeded subagent's fact",
        lambda: stored(system, "planner").get("prices: the price is 12 EUR") is Kind.FACT,
    )
    memories = Store(system.engine).show(Scope("acme", "ana", "planner"), all_statuses=True)
    fact = next(m for m in memories if m.content.startswith("prices:"))
    assert (fact.source, fact.subagent, fact.run_id) == (Source.SUBAGENT, "prices", parent.key)
    assert not any(m.kind is Kind.FACT and m.content.startswith("history:") for m in memories)
    tree = system.cli("runs", "tree", parent.key)
    assert tree.returncode == 0, tree.stderr
    lines = tree.stdout.splitlines()
    assert lines[0].startswith(parent.key) and "succeeded" in lines[0]
    assert any(line.startswith("  prices · ") and "succeeded" in line for line in lines)
    assert any(line.startswith("  history · ") and "cancelled" in line for line in lines)
