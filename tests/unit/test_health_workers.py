"""Which answering workers `nightshift status` counts, and which it calls misplaced."""

from __future__ import annotations

from workers.health import _answering, answered_consumers, judged, writer_queues

HERE = "postgresql 7715530255855671462 nightshift"


def test_a_role_counts_its_shards_and_not_other_roles() -> None:
    answers = {
        "writer@a": {"identity": HERE},
        "writer-3@b": {"identity": HERE},
        "writers@c": {"identity": HERE},
        "runs@a": {"identity": HERE},
    }
    check = _answering("memory writer", "writer", answers, HERE)
    assert check.ok and check.value == ["writer-3@b", "writer@a"]
    assert check.detail == "2 answering"


def test_a_worker_on_another_database_makes_its_role_unhealthy_and_is_named() -> None:
    answers = {
        "runs@a": {"identity": HERE, "url": "postgresql://postgres@db/nightshift"},
        "runs@b": {"identity": "sqlite /srv/ns.db", "url": "sqlite:////srv/ns.db"},
        "runs@c": {"identity": "", "url": "", "error": "OperationalError: no route"},
    }
    check = _answering("run workers", "runs", answers, HERE)
    assert not check.ok
    assert check.detail == (
        "3 answering, 2 on another database (runs@b serves sqlite:////srv/ns.db;"
        " runs@c serves a database it cannot reach: OperationalError: no route)"
    )


def test_without_a_database_to_compare_answering_is_enough() -> None:
    answers = {"runs@b": {"identity": "sqlite /srv/ns.db"}, "runs@c": {"error": "No such command"}}
    assert _answering("run workers", "runs", answers, None).ok
    assert not _answering("memory writer", "writer", answers, None).ok


def test_two_writers_on_one_queue_are_unhealthy() -> None:
    answers = {
        "writer@a": {"identity": HERE},
        "writer@b": {"identity": HERE},
        "writer-0@a": {"identity": HERE},
        "writer-1@a": {"identity": HERE},
        "runs@a": {"identity": HERE},
    }
    runs, writers = judged(answers, HERE)
    assert runs.ok and not writers.ok
    assert writers.detail == (
        "4 answering; 2 writers named writer share one queue (one per queue keeps a scope's"
        " writes in order)"
    )


def test_a_worker_of_another_name_on_another_database_is_named() -> None:
    answers = {
        "runs@a": {"identity": HERE},
        "writer@a": {"identity": HERE},
        "wrongdb@b": {"identity": "postgresql 1 other", "url": "postgresql://p@db/other"},
        "helper@c": {"identity": HERE},
    }
    checks = judged(answers, HERE)
    assert [c.name for c in checks if not c.ok] == ["other workers"]
    assert checks[-1].detail == ("1 on another database (wrongdb@b serves postgresql://p@db/other)")


def test_each_writer_queue_needs_exactly_one_consumer_as_the_broker_counts_them() -> None:
    assert writer_queues({"memory.write.0": 1, "memory.write.1": 1}).ok
    missing = writer_queues({"memory.write.0": 1, "memory.write.1": 0})
    assert not missing.ok and missing.detail == "memory.write.1 no consumer"
    shared = writer_queues({"memory.write": 2})
    assert not shared.ok
    assert (
        shared.detail == "memory.write 2 consumers (one per queue keeps a scope's writes in order)"
    )


def test_where_the_broker_does_not_count_the_answers_count_each_writer_queue() -> None:
    """Redis counts no consumers: a shard nobody reads shows in the workers' answers."""
    answers = {
        "writer-0@a": {"identity": HERE, "queues": ["memory.write.0"]},
        "runs@a": {"identity": HERE, "queues": ["maintenance", "runs"]},
        "writer-2@b": {"identity": HERE, "queues": ["memory.write.2"]},
    }
    counted = answered_consumers(answers, ["runs", "memory.write.0", "memory.write.1"])
    # The settings here name two shards; a writer reads a third one: all are counted.
    assert counted == {"memory.write.0": 1, "memory.write.1": 0, "memory.write.2": 1}
    check = writer_queues(counted, answered=True)
    assert not check.ok
    assert check.detail == "memory.write.1 no consumer among the workers that answer"


def test_a_writer_that_does_not_name_its_queues_leaves_them_uncounted() -> None:
    answers = {
        "writer@a": {"identity": HERE},
        "runs@a": {"identity": HERE, "queues": ["runs"]},
    }
    assert answered_consumers(answers, ["memory.write"]) is None
    # A worker that is no writer and names nothing is simply not counted.
    assert answered_consumers({"runs@a": {"error": "x"}}, ["memory.write"]) == {"memory.write": 0}
