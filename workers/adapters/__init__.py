"""Agent adapters: how a configured agent name becomes a callable taking a `RunContext`.

- `python` — the callable itself (`workers.agents.resolve` imports it);
- `command` — any executable in the sandbox, talking through files (`command.py`,
  the outbox format in `outbox.py`);
- `llm` — a tool-calling loop against an OpenAI-compatible endpoint (`llm.py`).
"""
