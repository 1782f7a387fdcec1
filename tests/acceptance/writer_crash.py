"""Loaded into a writer by the poison-write tests (`nightshift writer -I …`): judging a
candidate whose content holds `MARK` kills the writer's pool process with SIGKILL,
as a fault in native code or the kernel's out-of-memory killer would, every time."""

from __future__ import annotations

import os
import signal

from memory import writing
from memory.policy import AgentRules, Verdict
from memory.records import Candidate

MARK = "take the writer down"
_judge = writing.judge


def _crashing_judge(candidate: Candidate, rules: AgentRules) -> Verdict:
    if MARK in candidate.content:
        os.kill(os.getpid(), signal.SIGKILL)
    return _judge(candidate, rules)


writing.judge = _crashing_judge
