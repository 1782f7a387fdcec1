"""LangGraph's `BaseStore` over nightshift memory (optional extra ``nightshift[langgraph]``).

Importing this package needs ``langgraph`` installed; nothing else in `memory`
imports it. Start at `memory.langgraph.store`.
"""

from memory.langgraph.errors import ConcurrentChange, PutRefused, Refusal, ScanBoundExceeded
from memory.langgraph.store import NightshiftStore

__all__ = ["ConcurrentChange", "NightshiftStore", "PutRefused", "Refusal", "ScanBoundExceeded"]
