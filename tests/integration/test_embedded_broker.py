"""The embedded broker's put is atomic: a consumer never takes a half-written message."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pytest
from kombu import Connection

from workers import app as _app  # noqa: F401  (registers the transport)
from workers.embedded_broker import Channel


def connection(folder: Path) -> Connection:
    folder.mkdir(exist_ok=True)
    options = {"data_folder_in": str(folder), "data_folder_out": str(folder)}
    return Connection("filesystem://", transport_options=options)


def test_filesystem_urls_use_the_atomic_channel(tmp_path: Path) -> None:
    with connection(tmp_path / "q") as conn:
        assert isinstance(conn.default_channel, Channel)


def test_a_message_is_written_whole_then_appears_under_its_name(tmp_path: Path) -> None:
    folder = tmp_path / "q"
    with connection(folder) as conn:
        channel = conn.default_channel
        channel._put("memory.write", {"body": "x" * 100_000})
        names = os.listdir(folder)
        assert len(names) == 1 and names[0].endswith(".memory.write.msg")
        assert json.loads((folder / names[0]).read_text())["body"] == "x" * 100_000


def test_a_message_still_being_written_is_not_taken(tmp_path: Path) -> None:
    folder = tmp_path / "q"
    with connection(folder) as conn:
        channel = conn.default_channel
        (folder / "1_abc.memory.write.msg.part").write_text("")  # a put in progress
        channel._put("memory.write", {"n": 1})
        assert channel._get("memory.write") == {"n": 1}
        assert os.listdir(folder) == ["1_abc.memory.write.msg.part"]  # left alone


def consumer(folder: Path) -> Connection:
    options = {
        "data_folder_in": str(folder),
        "data_folder_out": str(folder),
        "unacked_folder": str(folder.parent / "unacked"),
        "control_folder": str(folder.parent / "control"),
        "polling_interval": 0.01,
    }
    return Connection("filesystem://", transport_options=options)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "queue").mkdir()
    return tmp_path / "queue"


@pytest.fixture
def queue_name() -> str:
    # kombu keeps declared bindings per process, not per folder: a fresh name per test
    return f"memory.write.{uuid.uuid4().hex[:8]}"


def taken_files(folder: Path) -> list[str]:
    return sorted(p.name for p in (folder.parent / "unacked").glob("*/*.msg"))


def test_a_taken_message_waits_for_its_ack_and_then_is_gone(folder: Path, queue_name: str) -> None:
    with consumer(folder) as conn:
        queue = conn.SimpleQueue(queue_name)
        queue.put({"batch": 1})
        message = queue.get(timeout=5)
        assert message.payload == {"batch": 1}
        assert not list(folder.glob("*.msg")) and len(taken_files(folder)) == 1
        message.ack()
        assert taken_files(folder) == []
        queue.close()


def test_a_dead_consumers_messages_go_back_to_the_queue_once(folder: Path, queue_name: str) -> None:
    # Before: the message was deleted as it was taken, and a consumer killed before
    # its ack (a writer SIGKILLed mid-apply) lost it for good.
    with consumer(folder) as doomed, consumer(folder) as survivor:
        first = doomed.SimpleQueue(queue_name)
        first.put({"batch": 1})
        assert first.get(timeout=5).payload == {"batch": 1}  # taken, never acknowledged
        first.put({"batch": 2})
        second = survivor.SimpleQueue(queue_name)
        kept = second.get(timeout=5)
        assert kept.payload == {"batch": 2}  # a live consumer keeps its own
        assert not kept.delivery_info.get("redelivered")
        with pytest.raises(second.Empty):
            second.get(timeout=0.3)
        os.close(doomed.default_channel._lock_fd)  # what the kernel does when it dies
        doomed.default_channel._lock_fd = -1
        channel = second.consumer.channel
        channel._restored_at = float("-inf")
        back = second.get(timeout=5)
        assert back.payload == {"batch": 1}
        # Marked, as Redis and RabbitMQ mark a message that comes back: the writer
        # counts such deliveries to give up a batch that kills it (workers.write_attempts).
        assert back.delivery_info.get("redelivered") is True
        back.ack()
        with pytest.raises(second.Empty):
            second.get(timeout=0.3)  # restored once, not twice


def test_a_rejected_message_is_requeued_once(folder: Path, queue_name: str) -> None:
    with consumer(folder) as conn:
        queue = conn.SimpleQueue(queue_name)
        queue.put({"batch": 1})
        first = queue.get(timeout=5)
        assert not first.delivery_info.get("redelivered")
        first.requeue()
        assert taken_files(folder) == [] and len(list(folder.glob("*.msg"))) == 1
        again = queue.get(timeout=5)
        assert again.payload == {"batch": 1} and again.delivery_info.get("redelivered") is True
        again.ack()
        with pytest.raises(queue.Empty):
            queue.get(timeout=0.3)
        queue.close()
