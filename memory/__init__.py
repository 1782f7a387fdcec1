"""nightshift's memory store: a plain library, usable from any Python program.

It imports no Celery. Open a store with `memory.store.open_store(url)`; the memory
writer, the CLI and the LangGraph adapter are all clients of the same `Store`.
"""
