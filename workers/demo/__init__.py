"""The demo: a heartbeat agent that watches a local incident feed and remembers what it handled."""
